package service

// FileCacheBytes bounds the chunk cache of the random-access disk reader.
const FileCacheBytes = 64 << 20

//go:build !cgo

package chunk

// Compressor names the zstd implementation chunks are compressed with.
const Compressor = "klauspost/compress zstd (pure Go)"

// Builds without cgo (no C compiler, static cross-builds) compress and
// decompress with klauspost/compress (compress_go.go). Backups run slower
// than with the C library (compress_cgo.go) but write the same kind of
// frames.
type (
	compressor   = goCompressor
	decompressor = goDecompressor
)

var (
	newCompressor   = newGoCompressor
	newDecompressor = newGoDecompressor
)

// Package chunk turns chunk plaintext into stored blobs and back:
// compress with zstd (or store raw when compression does not pay), then seal
// (encrypt + authenticate). Decoding verifies the blob's authentication tag
// and re-hashes the plaintext against its chunk ID, so a corrupted, swapped
// or misplaced chunk is always detected.
//
// Blob plaintext layout: one byte of compression method, then the payload.
package chunk

import (
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
)

// Compression methods stored in the first plaintext byte of a blob.
const (
	MethodRaw  byte = 0
	MethodZstd byte = 1
)

// sealContext authenticates blobs as chunk data.
const sealContext = "chunk"

// ErrCorrupt means a chunk failed verification.
var ErrCorrupt = errors.New("chunk corrupt")

// Encoder compresses and seals chunks. One per goroutine.
type Encoder struct {
	key  *crypto.Key
	zstd *compressor // nil when compression is off
	buf  []byte
}

// NewEncoder returns an encoder; level follows the zstd command line
// (1 fastest ... 19), 0 disables compression.
func NewEncoder(key *crypto.Key, level int) (*Encoder, error) {
	e := &Encoder{key: key}
	if level > 0 {
		z, err := newCompressor(level)
		if err != nil {
			return nil, err
		}
		e.zstd = z
	}
	return e, nil
}

// Encode appends the sealed blob for data to dst and reports whether the
// payload is compressed.
func (e *Encoder) Encode(dst, data []byte) ([]byte, bool) {
	compressed := false
	if e.zstd != nil {
		out, err := e.zstd.compress(append(e.buf[:0], MethodZstd), data)
		if err == nil {
			e.buf = out // keeps the grown buffer for the next chunk
		}
		// Incompressible data (already compressed files, encrypted
		// volumes) is stored raw: the decoder then skips zstd entirely.
		// A compressor error (C zstd fails only on bad parameters) also
		// stores the chunk raw: it stays correct, only larger.
		compressed = err == nil && len(out)-1 < len(data)-len(data)/64
	}
	if !compressed {
		e.buf = append(append(e.buf[:0], MethodRaw), data...)
	}
	return e.key.Seal(dst, e.buf, sealContext), compressed
}

// Decoder opens and verifies chunks. One per goroutine.
type Decoder struct {
	key    *crypto.Key
	hasher *crypto.Hasher
	zstd   *decompressor
	buf    []byte
}

// NewDecoder returns a decoder for chunks of at most maxSize bytes.
func NewDecoder(key *crypto.Key, maxSize int) (*Decoder, error) {
	z, err := newDecompressor(maxSize)
	if err != nil {
		return nil, err
	}
	return &Decoder{key: key, hasher: key.NewHasher(), zstd: z}, nil
}

// Decode appends the plaintext of the sealed blob to dst after verifying
// it is the chunk want of rawLen bytes.
func (d *Decoder) Decode(dst, sealed []byte, want id.ID, rawLen int) ([]byte, error) {
	var err error
	d.buf, err = d.key.Open(d.buf[:0], sealed, sealContext)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w: %w", want.Short(), ErrCorrupt, err)
	}
	if len(d.buf) == 0 {
		return nil, fmt.Errorf("chunk %s: empty blob: %w", want.Short(), ErrCorrupt)
	}
	start := len(dst)
	switch d.buf[0] {
	case MethodRaw:
		dst = append(dst, d.buf[1:]...)
	case MethodZstd:
		dst, err = d.zstd.decompress(dst, d.buf[1:], rawLen)
		if err != nil {
			return nil, fmt.Errorf("chunk %s: decompress: %w: %w", want.Short(), ErrCorrupt, err)
		}
	default:
		return nil, fmt.Errorf("chunk %s: unknown compression method %d: %w", want.Short(), d.buf[0], ErrCorrupt)
	}
	plain := dst[start:]
	if len(plain) != rawLen {
		return nil, fmt.Errorf("chunk %s: %d bytes, index says %d: %w", want.Short(), len(plain), rawLen, ErrCorrupt)
	}
	if got := d.hasher.Sum(plain); got != want {
		return nil, fmt.Errorf("chunk %s: content hashes to %s: %w", want.Short(), got.Short(), ErrCorrupt)
	}
	return dst, nil
}

// Hasher exposes the decoder's hasher for callers that hash plaintext.
func (d *Decoder) Hasher() *crypto.Hasher { return d.hasher }

//go:build cgo

package chunk

import (
	"errors"
	"fmt"
	"slices"

	zstdc "github.com/DataDog/zstd"
)

// Compressor names the zstd implementation chunks are compressed with.
const Compressor = "libzstd (C, bundled by github.com/DataDog/zstd)"

// compressor compresses with the reference C zstd, built into the binary
// from the sources github.com/DataDog/zstd bundles. On a full backup
// compression is most of the CPU time, and C level 1 runs 1.7x faster than
// klauspost/compress's SpeedFastest on disk-image chunks with a slightly
// better ratio (measured on the benchmark image: 666 vs 395 MB/s per core
// at 256 KiB chunks, 712 vs 716 MB stored). Builds without cgo use
// compress_purego.go; both write standard zstd frames, decoded alike.
type compressor struct {
	ctx   zstdc.Ctx
	level int
}

func newCompressor(level int) (*compressor, error) {
	return &compressor{ctx: zstdc.NewCtx(), level: level}, nil
}

// compress appends the zstd frame of src to dst.
func (c *compressor) compress(dst, src []byte) ([]byte, error) {
	start := len(dst)
	need := start + zstdc.CompressBound(len(src))
	if cap(dst) < need {
		grown := make([]byte, start, need)
		copy(grown, dst)
		dst = grown
	}
	// CompressLevel writes into its dst argument when it has room for the
	// bound, so the frame lands in place after dst's prefix.
	out, err := c.ctx.CompressLevel(dst[start:need], src, c.level)
	if err != nil {
		return nil, err
	}
	return dst[:start+len(out)], nil
}

// decompressor decompresses with the same C library, straight into the
// caller's buffer: a chunk's plaintext length is known (the index's raw
// length), so one call writes it where the restore writes it from.
// Measured against klauspost/compress's decoder, which builds without cgo
// use (compress_purego.go): docs/benchmarks.md, session of 2026-12-07
// (afternoon), issue 42.
type decompressor struct {
	ctx zstdc.Ctx
}

func newDecompressor(int) (*decompressor, error) {
	return &decompressor{ctx: zstdc.NewCtx()}, nil
}

// decompress appends the n bytes of plaintext of the zstd frame src to
// dst; src must decompress to exactly n bytes. The output is bounded by
// n, whatever src claims.
func (d *decompressor) decompress(dst, src []byte, n int) ([]byte, error) {
	if n <= 0 || len(src) == 0 {
		return nil, errors.New("empty zstd payload")
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	got, err := d.ctx.DecompressInto(dst[start:], src)
	if err != nil {
		return nil, err
	}
	if got != n {
		return nil, fmt.Errorf("zstd frame holds %d bytes, want %d", got, n)
	}
	return dst, nil
}

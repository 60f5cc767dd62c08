package chunk

import (
	"os"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// benchFrames compresses up to 32 chunks of 256 KiB of this test binary
// (program code, which compresses about as well as an OS disk's files)
// at level 1, as a backup does.
func benchFrames(b *testing.B) (plains, frames [][]byte) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		b.Fatal(err)
	}
	c, err := newCompressor(1)
	if err != nil {
		b.Fatal(err)
	}
	for off := 0; off+256<<10 <= len(data) && len(plains) < 32; off += 256 << 10 {
		p := data[off : off+256<<10]
		f, err := c.compress(nil, p)
		if err != nil {
			b.Fatal(err)
		}
		plains, frames = append(plains, p), append(frames, f)
	}
	return plains, frames
}

// BenchmarkDecompress compares the build's decompressor (the C library
// in cgo builds) with klauspost/compress's decoder on the same frames:
//
//	go test ./internal/repo/chunk -run '^$' -bench Decompress -cpu 1
func BenchmarkDecompress(b *testing.B) {
	plains, frames := benchFrames(b)
	var n int64
	for _, p := range plains {
		n += int64(len(p))
	}
	dst := make([]byte, 0, 256<<10)
	b.Run("build", func(b *testing.B) {
		d, err := newDecompressor(1 << 20)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(n)
		for range b.N {
			for i, f := range frames {
				if out, err := d.decompress(dst[:0], f, len(plains[i])); err != nil || len(out) != len(plains[i]) {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("klauspost", func(b *testing.B) {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(n)
		for range b.N {
			for i, f := range frames {
				if out, err := d.DecodeAll(f, dst[:0]); err != nil || len(out) != len(plains[i]) {
					b.Fatal(err)
				}
			}
		}
	})
}

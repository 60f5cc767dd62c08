package backup

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

// The backup pipeline's stages, one benchmark each, so that a regression
// shows where it is (issue 42):
//
//	go test ./internal/backup -run '^$' -bench Stage -benchmem
//
// Every figure is per byte of plaintext (ns/B; MB/s from SetBytes) with
// the allocations per operation, on two kinds of data: "code", this test
// binary's own bytes (machine code and read-only data: real bytes that
// zstd level 1 compresses well), and "random", which does not compress
// (already compressed files, encrypted volumes). Chunks are the default
// 256 KiB. The stages: read (ReadAt of 1 MiB runs from a file in the page
// cache), zero (the all-zero check every span gets, on zeros), hash (the keyed
// BLAKE3 chunk ID), compress+seal (the chunk encoder at the repository's
// default level), seal (level 0: the copy and AES-GCM alone), store (Claim
// and Stream.Add of sealed blobs into packs of a local repository), and
// pipeline (the whole of backupDisk on a 32 MiB image into a fresh
// repository).

const benchChunk = 256 << 10

// benchData returns n bytes of the named kind.
func benchData(b *testing.B, kind string, n int) []byte {
	b.Helper()
	out := make([]byte, 0, n)
	switch kind {
	case "code":
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		code, err := os.ReadFile(exe)
		if err != nil {
			b.Fatal(err)
		}
		// Skip the ELF header's page; repeat when the binary is short.
		code = code[4096:]
		for len(out) < n {
			out = append(out, code[:min(len(code), n-len(out))]...)
		}
	case "random":
		r := rand.NewChaCha8([32]byte{42})
		out = out[:n]
		_, _ = r.Read(out)
	default:
		b.Fatalf("unknown data %q", kind)
	}
	return out
}

// perByte reports ns per byte of plaintext processed by the loop.
func perByte(b *testing.B, bytes int64) {
	if bytes > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(bytes), "ns/B")
	}
}

// chunks runs f on the 256 KiB chunks of data, round-robin, and reports
// per-byte figures.
func chunks(b *testing.B, data []byte, f func(chunk []byte)) {
	b.SetBytes(benchChunk)
	b.ReportAllocs()
	var n int64
	for i := 0; b.Loop(); i++ {
		off := (i * benchChunk) % len(data)
		f(data[off : off+benchChunk])
		n += benchChunk
	}
	perByte(b, n)
}

func BenchmarkStage(b *testing.B) {
	// The zero check returns at the first non-zero byte: its cost is that
	// of a span of zeros (2.6 of the benchmark image's 4 GiB).
	b.Run("zero/zeros", func(b *testing.B) {
		chunks(b, make([]byte, benchChunk), func(c []byte) {
			if !allZero(c) {
				b.Fatal("zeros are not zero")
			}
		})
	})
	for _, kind := range []string{"code", "random"} {
		data := benchData(b, kind, 16<<20)
		r := repotest.New(b, repo.InitOptions{})
		b.Run("read/"+kind, func(b *testing.B) { benchRead(b, data) })
		b.Run("hash/"+kind, func(b *testing.B) {
			h := r.Key().NewHasher()
			chunks(b, data, func(c []byte) { h.Sum(c) })
		})
		b.Run("compress+seal/"+kind, func(b *testing.B) {
			enc, err := r.NewEncoder()
			if err != nil {
				b.Fatal(err)
			}
			var out []byte
			chunks(b, data, func(c []byte) { out, _ = enc.Encode(out[:0], c) })
		})
		b.Run("seal/"+kind, func(b *testing.B) {
			enc, err := repo.NewEncoderWith(r.Key(), 0)
			if err != nil {
				b.Fatal(err)
			}
			var out []byte
			chunks(b, data, func(c []byte) { out, _ = enc.Encode(out[:0], c) })
		})
		b.Run("store/"+kind, func(b *testing.B) { benchStore(b, r, data) })
		b.Run("pipeline/"+kind, func(b *testing.B) { benchPipeline(b, kind) })
	}
}

// benchRead reads a file of data in 1 MiB runs (the default read batch).
func benchRead(b *testing.B, data []byte) {
	path := filepath.Join(b.TempDir(), "disk.img")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	src, err := OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	buf := make([]byte, defaultReadBatch)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var n int64
	for i := 0; b.Loop(); i++ {
		off := int64(i*len(buf)) % int64(len(data))
		if _, err := src.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		n += int64(len(buf))
	}
	perByte(b, n)
}

// benchStore stores sealed chunks, each under a new ID, as the owner of
// a fresh claim: packing, the pack file's writes and the index entries.
func benchStore(b *testing.B, r *repo.Repository, data []byte) {
	ctx := context.Background()
	enc, err := r.NewEncoder()
	if err != nil {
		b.Fatal(err)
	}
	sealed, _ := enc.Encode(nil, data[:benchChunk])
	w, err := r.NewWriter(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	st := w.NewStream()
	h := r.Key().NewHasher()
	var seed [8]byte
	b.SetBytes(benchChunk)
	b.ReportAllocs()
	var n int64
	for i := uint64(0); b.Loop(); i++ {
		binary.LittleEndian.PutUint64(seed[:], i)
		x := h.Sum(seed[:])
		p, owner, err := w.Claim(ctx, x)
		if err != nil || !owner {
			b.Fatalf("claim %d: owner %v, %v", i, owner, err)
		}
		if err := st.Add(ctx, x, sealed, benchChunk, p); err != nil {
			b.Fatal(err)
		}
		n += benchChunk
	}
	perByte(b, n)
	b.StopTimer()
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// benchPipeline backs up a 32 MiB image of the data into a fresh
// repository per iteration: every stage, with the workers and readers of
// a real backup.
func benchPipeline(b *testing.B, kind string) {
	ctx := context.Background()
	const size = 32 << 20
	path := filepath.Join(b.TempDir(), "disk.img")
	if err := os.WriteFile(path, benchData(b, kind, size), 0o644); err != nil {
		b.Fatal(err)
	}
	src, err := OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	d := Disk{Key: "0", Name: "disk.img", Reader: src, Size: size, Mode: "full"}
	b.SetBytes(size)
	b.ReportAllocs()
	var n int64
	for range b.N {
		b.StopTimer()
		r := repotest.New(b, repo.InitOptions{})
		w, err := r.NewWriter(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, mw, err := backupToMap(ctx, w, w.NewStream(), d, Options{}, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		mw.Abort()
		if err := w.Sync(ctx, res.deps); err != nil {
			b.Fatal(err)
		}
		n += size
		b.StopTimer()
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	perByte(b, n)
}

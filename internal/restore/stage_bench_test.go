package restore_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
)

// The restore pipeline's stages, one benchmark each, so that a regression
// shows where it is (issue 42):
//
//	go test ./internal/restore -run '^$' -bench Stage -benchmem
//
// Per byte of plaintext (ns/B; MB/s from SetBytes), with allocations, on
// the data internal/backup's stage benchmarks use: "code" (the test
// binary's own bytes, which compress) and "random" (which are stored
// raw). Chunks are the default 256 KiB. The stages: decode (open the
// AES-GCM blob, decompress, re-hash against the chunk ID), decode-raw (the
// same blob stored without compression: open, copy, hash; decode minus
// decode-raw is decompression), fetch (plan the disk map, read the packs
// and decode, with the restore's workers: restore.Chunks, nothing
// written) and pipeline (restore.ToFile of a 32 MiB image into a new
// file: fetch plus the writes and the final fsync).

const benchChunk = 256 << 10

// benchData returns n bytes of the named kind (see the comment above).
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
		code = code[4096:] // past the ELF header's page
		for len(out) < n {
			out = append(out, code[:min(len(code), n-len(out))]...)
		}
	case "random":
		out = out[:n]
		_, _ = rand.NewChaCha8([32]byte{42}).Read(out)
	}
	return out
}

func perByte(b *testing.B, bytes int64) {
	if bytes > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(bytes), "ns/B")
	}
}

func BenchmarkStage(b *testing.B) {
	for _, kind := range []string{"code", "random"} {
		data := benchData(b, kind, 16<<20)
		r := repotest.New(b, repo.InitOptions{})
		b.Run("decode/"+kind, func(b *testing.B) { benchDecode(b, r, data, -1) })
		b.Run("decode-raw/"+kind, func(b *testing.B) { benchDecode(b, r, data, 0) })
		img := filepath.Join(b.TempDir(), "disk.img")
		if err := os.WriteFile(img, benchData(b, kind, 32<<20), 0o644); err != nil {
			b.Fatal(err)
		}
		p := backuptest.BackupImage(b, r, img, backup.Options{})
		b.Run("fetch/"+kind, func(b *testing.B) { benchFetch(b, r, p) })
		b.Run("pipeline/"+kind, func(b *testing.B) { benchToFile(b, r, p) })
	}
}

// benchDecode decodes sealed chunks of data; level 0 seals them without
// compression, -1 at the repository's level.
func benchDecode(b *testing.B, r *repo.Repository, data []byte, level int) {
	enc, err := r.NewEncoder()
	if level >= 0 {
		enc, err = repo.NewEncoderWith(r.Key(), level)
	}
	if err != nil {
		b.Fatal(err)
	}
	h := r.Key().NewHasher()
	type blob struct {
		sealed []byte
		id     id.ID
	}
	var blobs []blob
	for off := 0; off < len(data); off += benchChunk {
		c := data[off : off+benchChunk]
		sealed, _ := enc.Encode(nil, c)
		blobs = append(blobs, blob{sealed, h.Sum(c)})
	}
	dec, err := r.NewDecoder()
	if err != nil {
		b.Fatal(err)
	}
	plain := make([]byte, 0, benchChunk)
	b.SetBytes(benchChunk)
	b.ReportAllocs()
	var n int64
	for i := 0; b.Loop(); i++ {
		bl := blobs[i%len(blobs)]
		if _, err := dec.Decode(plain[:0], bl.sealed, bl.id, benchChunk); err != nil {
			b.Fatal(err)
		}
		n += benchChunk
	}
	perByte(b, n)
}

// benchFetch reads and decodes every chunk of the point's disk.
func benchFetch(b *testing.B, r *repo.Repository, p *repo.Point) {
	ctx := context.Background()
	m, err := r.OpenDiskMap(ctx, p.Disks[0].Map)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(m.DiskSize())
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		err := restore.Chunks(ctx, r, m, 0, nil, func(id.ID, []uint64, []byte) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		n += m.DiskSize()
	}
	perByte(b, n)
}

// benchToFile restores the point's disk into a new file per iteration.
func benchToFile(b *testing.B, r *repo.Repository, p *repo.Point) {
	ctx := context.Background()
	dir := b.TempDir()
	size := p.Disks[0].Size
	b.SetBytes(size)
	b.ReportAllocs()
	var n int64
	for i := 0; b.Loop(); i++ {
		out := filepath.Join(dir, "out.img")
		if _, err := restore.ToFile(ctx, r, p, p.Disks[0], out, restore.FileOptions{}); err != nil {
			b.Fatal(err)
		}
		n += size
		b.StopTimer()
		if err := os.Remove(out); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	perByte(b, n)
}

package repotest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/chunk"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// Synthetic describes a generated repository for benchmarks of what grows
// with the number of chunk references (garbage collection, verification):
// Points daily backup points of one VM with Disks disks each. The first
// point stores every span of every disk; each later point rewrites
// ChangeRate of the spans (a new chunk) and keeps the rest, so a chunk is
// referenced by every point until its span is rewritten, as with real
// incremental backups. HoleRate of the spans are holes in every point.
//
// Chunks are real (compressed, encrypted, authenticated, their IDs the
// repository's keyed hash of their plaintext) but nearly empty: a span's
// plaintext is a 32-byte header naming it followed by zeros, which zstd
// turns into a blob of a few dozen bytes. So 10^7 references take a few
// hundred MB (mostly disk maps), and verify --read-data, gc and restore
// accept the repository like any other.
type Synthetic struct {
	Points int // backup points (default 100)
	Disks  int // disks per point (default 4)
	// References is the number of chunk references of all disk maps
	// together, holes not counted (default 100000); the disks' size
	// follows from it.
	References    int64
	ChangeRate    float64 // share of spans rewritten between two points (default 0.02)
	HoleRate      float64 // share of spans that are holes (default 0.05)
	ChunksPerPack int     // default 128, about what 16 MiB packs of compressed 256 KiB chunks hold
	Seed          uint64
}

// SyntheticStats describes what Generate wrote.
type SyntheticStats struct {
	Spans      int   // per disk
	References int64 // non-hole spans over all disk maps
	Chunks     int64 // distinct chunks
	Packs      int64
	Segments   int
	Bytes      int64 // stored bytes of packs, segments and disk maps
}

func (s *Synthetic) defaults() {
	if s.Points <= 0 {
		s.Points = 100
	}
	if s.Disks <= 0 {
		s.Disks = 4
	}
	if s.References <= 0 {
		s.References = 100000
	}
	if s.ChangeRate <= 0 {
		s.ChangeRate = 0.02
	}
	if s.HoleRate < 0 || s.HoleRate >= 1 {
		s.HoleRate = 0
	} else if s.HoleRate == 0 {
		s.HoleRate = 0.05
	}
	if s.ChunksPerPack <= 0 {
		s.ChunksPerPack = 128
	}
}

// Spans is the number of spans of every disk.
func (s Synthetic) Spans() int {
	s.defaults()
	return int(math.Ceil(float64(s.References) / float64(s.Points*s.Disks) / (1 - s.HoleRate)))
}

// uniform maps (kind, a, b, c) to [0, 1) with splitmix64, deterministically.
func (s Synthetic) uniform(kind, a, b, c uint64) float64 {
	x := s.Seed ^ kind*0x9e3779b97f4a7c15 ^ a*0xbf58476d1ce4e5b9 ^ b*0x94d049bb133111eb ^ c*0x2545f4914f6cdd1d
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

func (s Synthetic) hole(disk, span int) bool {
	return s.uniform(1, uint64(disk), uint64(span), 0) < s.HoleRate
}

func (s Synthetic) rewritten(point, disk, span int) bool {
	return point > 0 && s.uniform(2, uint64(point), uint64(disk), uint64(span)) < s.ChangeRate
}

// version is the point that last wrote span of disk as of point.
func (s Synthetic) version(point, disk, span int) int {
	for ; point > 0; point-- {
		if s.rewritten(point, disk, span) {
			return point
		}
	}
	return 0
}

// content writes the plaintext of the chunk that point version wrote to
// span of disk into buf (one chunk size, zeroed beyond the header).
func (s Synthetic) content(buf []byte, disk, span, version int) {
	copy(buf, "coffer-synthetic")
	binary.LittleEndian.PutUint32(buf[16:], uint32(disk))
	binary.LittleEndian.PutUint32(buf[20:], uint32(span))
	binary.LittleEndian.PutUint32(buf[24:], uint32(version))
	binary.LittleEndian.PutUint32(buf[28:], uint32(s.Seed))
}

// Span returns what a restore of point (0 = oldest) must write for span
// of disk: buf (one chunk size) filled with the span's bytes.
func (s Synthetic) Span(buf []byte, point, disk, span int) []byte {
	s.defaults()
	clear(buf)
	if !s.hole(disk, span) {
		s.content(buf, disk, span, s.version(point, disk, span))
	}
	return buf
}

// Generate writes the points into r, oldest first, each in a write
// session of its own that stores its new chunks in packs, indexes them in
// one segment, then writes its disk maps and its manifest, the order a
// backup follows. r's chunk size sets the spans' size; 64 KiB (the
// smallest) keeps generation fast.
func (s Synthetic) Generate(ctx context.Context, r *repo.Repository) (*SyntheticStats, error) {
	s.defaults()
	g := &generator{s: s, r: r, cs: r.Config().ChunkSize, stats: &SyntheticStats{Spans: s.Spans()}}
	enc, err := chunk.NewEncoder(r.Key(), r.Config().Level())
	if err != nil {
		return nil, err
	}
	g.enc, g.hasher, g.plain = enc, r.Key().NewHasher(), make([]byte, g.cs)
	g.cur = make([][]id.ID, s.Disks)
	for d := range g.cur {
		g.cur[d] = make([]id.ID, g.stats.Spans)
	}
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -s.Points)
	for p := range s.Points {
		if err := g.point(ctx, p, start.AddDate(0, 0, p)); err != nil {
			return nil, fmt.Errorf("synthetic point %d: %w", p, err)
		}
	}
	return g.stats, nil
}

type generator struct {
	s      Synthetic
	r      *repo.Repository
	cs     int
	enc    *chunk.Encoder
	hasher *crypto.Hasher
	plain  []byte
	sealed []byte
	cur    [][]id.ID // the chunk of every span of every disk as of the current point
	stats  *SyntheticStats

	// the session's packs
	session pack.SessionPrefix
	seq     uint32
	obj     store.ObjectWriter
	pw      *pack.Writer
	pid     pack.ID
	entries []index.Entry
}

func (g *generator) point(ctx context.Context, p int, when time.Time) error {
	w, err := g.r.NewWriter(ctx, "synthetic backup")
	if err != nil {
		return err
	}
	err = g.fill(ctx, w, p, when)
	if g.obj != nil {
		_ = g.obj.Abort()
		g.obj, g.pw = nil, nil
	}
	if cerr := w.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// fill stores point p's new chunks, indexes them, and writes its disk maps
// and manifest.
func (g *generator) fill(ctx context.Context, w *repo.Writer, p int, when time.Time) error {
	g.session, g.seq, g.entries = w.Session(), 0, g.entries[:0]
	snap := &repo.Point{Time: when, Host: "synthetic", Source: repo.Source{Kind: "disk", VMName: "synthetic"}, Mode: "incremental"}
	if p == 0 {
		snap.Mode = "full"
	}
	for d := range g.s.Disks {
		for i := range g.stats.Spans {
			if g.s.hole(d, i) {
				continue // stays the zero ID
			}
			g.stats.References++
			if p == 0 || g.s.rewritten(p, d, i) {
				x, err := g.store(ctx, d, i, p)
				if err != nil {
					return err
				}
				g.cur[d][i] = x
				snap.ChunksNew++
			}
			snap.ChunksTotal++
		}
	}
	if err := g.closePack(); err != nil {
		return err
	}
	if len(g.entries) > 0 {
		seg, err := index.WriteSegment(ctx, g.r.Store(), g.r.Key(), g.entries, nil)
		if err != nil {
			return err
		}
		g.r.Index().Add(seg)
		g.stats.Segments++
		g.stats.Bytes += seg.Size
	}
	size := int64(g.stats.Spans) * int64(g.cs)
	for d := range g.s.Disks {
		name, err := w.WriteDiskMap(ctx, size, g.cs, g.cur[d], time.Time{})
		if err != nil {
			return err
		}
		if fi, err := g.r.Store().Stat(ctx, name); err == nil {
			g.stats.Bytes += fi.Size
		}
		snap.Disks = append(snap.Disks, repo.Disk{Key: strconv.Itoa(d), Name: "disk" + strconv.Itoa(d), Kind: "disk",
			Size: size, ChunkSize: g.cs, Map: name, Mode: snap.Mode})
	}
	return w.Commit(ctx, snap, nil)
}

// store writes the chunk that point p wrote to span i of disk d into the
// session's current pack and returns its ID.
func (g *generator) store(ctx context.Context, d, i, p int) (id.ID, error) {
	clear(g.plain[:32])
	g.s.content(g.plain, d, i, p)
	x := g.hasher.Sum(g.plain)
	g.sealed, _ = g.enc.Encode(g.sealed[:0], g.plain)
	if g.pw == nil {
		g.seq++
		g.pid = pack.MakeID(g.session, g.seq)
		obj, err := g.r.Store().Create(ctx, pack.ObjectName(g.pid), store.PutOptions{})
		if err != nil {
			return x, err
		}
		pw, err := pack.NewWriter(obj, g.r.Key())
		if err != nil {
			_ = obj.Abort()
			return x, err
		}
		g.obj, g.pw = obj, pw
	}
	e, err := g.pw.Add(x, g.sealed, g.cs)
	if err != nil {
		return x, err
	}
	g.entries = append(g.entries, index.Entry{ID: x, Location: index.Location{Pack: g.pid, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength}})
	g.stats.Chunks++
	if g.pw.Count() == g.s.ChunksPerPack {
		return x, g.closePack()
	}
	return x, nil
}

func (g *generator) closePack() error {
	if g.pw == nil {
		return nil
	}
	pw, obj := g.pw, g.obj
	g.pw, g.obj = nil, nil
	if err := pw.Finish(); err != nil {
		_ = obj.Abort()
		return err
	}
	fi, err := obj.Commit()
	if err != nil {
		return err
	}
	g.stats.Packs++
	g.stats.Bytes += fi.Size
	return nil
}

package volume_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

const blockSize = 16 << 10

type env struct {
	t   *testing.T
	dir string
	lib *vtl.Library
	vl  *volume.Library
}

// newEnv makes a VTL with n blank cartridges of capacity bytes.
func newEnv(t *testing.T, n int, capacity int64) *env {
	t.Helper()
	dir := t.TempDir()
	if err := vtl.Create(dir, vtl.Config{Drives: 1, Slots: n + 1, Capacity: capacity}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir}
	e.open()
	for i := 1; i <= n; i++ {
		if err := e.lib.AddCartridge(code(i), i, vtl.CartridgeInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func code(i int) string { return string([]byte{'C', 'F', 'R', '0', '0', byte('0' + i), 'L', '8'}) }

func (e *env) open() {
	l, err := vtl.Open(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close() })
	d, _ := l.Drive(0)
	e.lib, e.vl = l, &volume.Library{Changer: l, Drive: d}
}

// reopen is a restart after a crash.
func (e *env) reopen() {
	e.lib.Close()
	e.open()
}

func (e *env) pool() *volume.Pool {
	return &volume.Pool{Lib: e.vl, Name: "weekly", BlockSize: blockSize}
}

func data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sources(payloads [][]byte) []volume.Source { return named("point", payloads) }

func named(prefix string, payloads [][]byte) []volume.Source {
	var out []volume.Source
	for i, p := range payloads {
		out = append(out, volume.Source{
			Info: format.StreamInfo{Point: prefix + string(rune('a'+i)), VM: "vm", Repository: "r"},
			Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(p)), nil },
		})
	}
	return out
}

// placed is the catalogue of a point, from the volumes' indexes.
func placed(ixs []format.VolumeIndex, point string) []volume.Placed {
	var out []volume.Placed
	for _, ix := range ixs {
		for _, s := range ix.Segments {
			if s.Point == point {
				out = append(out, volume.Placed{Barcode: ix.Label.Barcode, Segment: s})
			}
		}
	}
	return out
}

func (e *env) readBack(ixs []format.VolumeIndex, point string, want []byte, o volume.ReadOptions) volume.ReadStats {
	e.t.Helper()
	var got bytes.Buffer
	st, err := volume.ReadStream(context.Background(), e.vl, placed(ixs, point), &got, o)
	if err != nil {
		e.t.Fatalf("read %s: %v", point, err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		e.t.Fatalf("%s: read %d bytes, not the %d written", point, got.Len(), len(want))
	}
	return st
}

func TestLabelAndMount(t *testing.T) {
	e := newEnv(t, 1, 4<<20)
	if err := e.lib.Load(1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := volume.Mount(e.vl.Drive); !errors.Is(err, volume.ErrBlank) {
		t.Fatalf("mount of a blank cartridge: %v", err)
	}
	v, err := volume.Label(e.vl.Drive, volume.LabelOptions{Barcode: code(1), Pool: "weekly", BlockSize: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	m, err := volume.Mount(e.vl.Drive)
	if err != nil {
		t.Fatal(err)
	}
	if m.Label != v.Label || m.Tail != volume.TailClean || len(m.Index.Segments) != 0 {
		t.Fatalf("mounted %+v tail %v", m.Label, m.Tail)
	}
}

// Streams multiplexed onto one volume read back whole, each through its
// own extents, and a scan of the volume finds exactly the index.
func TestMultiplexedSession(t *testing.T) {
	e := newEnv(t, 1, 16<<20)
	payloads := [][]byte{data(1, 100000), data(2, 3*blockSize), data(3, 1), data(4, 250000), {}}
	v, err := e.pool().First(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := volume.WriteSession(context.Background(), v, e.pool(), sources(payloads), volume.WriteOptions{Multiplex: 4, RunBlocks: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Volumes) != 1 || len(res.Volumes[0].Segments) != len(payloads) {
		t.Fatalf("result: %+v", res)
	}
	for i, p := range payloads {
		st := e.readBack(res.Volumes, "point"+string(rune('a'+i)), p, volume.ReadOptions{})
		if need := int64(max(1, (len(p)+format.Payload(blockSize)-1)/format.Payload(blockSize))); st.BlocksNeeded != need || st.BlocksRead != need {
			t.Fatalf("point %d: read %d blocks, needed %d, want %d", i, st.BlocksRead, st.BlocksNeeded, need)
		}
	}
	m, err := e.vl.Mount(context.Background(), code(1))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := m.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.IndexMatches || rep.Unindexed != 0 || len(rep.Scanned) != len(payloads) || len(rep.Bad) != 0 {
		t.Fatalf("scan: %+v", rep)
	}
}

// A session larger than a volume continues on the next one at the early
// warning, and each full volume ends with its index.
func TestSessionSpansVolumes(t *testing.T) {
	e := newEnv(t, 3, 1<<20)
	payloads := [][]byte{data(5, 900000), data(6, 700000)}
	p := e.pool()
	v, err := p.First(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := volume.WriteSession(context.Background(), v, p, sources(payloads), volume.WriteOptions{Multiplex: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Volumes) < 2 || !res.Volumes[0].Full || len(res.NoIndex) != 0 {
		t.Fatalf("volumes: %d, first full %v, no index %v", len(res.Volumes), res.Volumes[0].Full, res.NoIndex)
	}
	for i, pl := range payloads {
		e.readBack(res.Volumes, "point"+string(rune('a'+i)), pl, volume.ReadOptions{ReadThrough: 4})
	}
	// Each volume's own index, read from the tape, is the one returned.
	for _, ix := range res.Volumes {
		m, err := e.vl.Mount(context.Background(), ix.Label.Barcode)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Index.Segments) != len(ix.Segments) || m.Index.Full != ix.Full || m.Index.Label.MediaSet != res.Volumes[0].Label.MediaSet {
			t.Fatalf("volume %s: index on tape %+v, written %+v", ix.Label.Barcode, m.Index, ix)
		}
	}
}

// Killed while writing: the torn last block is found at mount, the next
// session overwrites it and appends, and everything written before the
// crashed session is intact.
func TestTornWriteAppendsCleanly(t *testing.T) {
	e := newEnv(t, 1, 16<<20)
	first := [][]byte{data(7, 60000)}
	v, err := e.pool().First(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res1, err := volume.WriteSession(context.Background(), v, e.pool(), sources(first), volume.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const whole = 3 // records written whole before the torn one: the session label, then data
	e.lib.Faults().TornWriteAfter(whole)
	if _, err := volume.WriteSession(context.Background(), v, e.pool(), sources([][]byte{data(8, 200000)}), volume.WriteOptions{}); !errors.Is(err, vtl.ErrCrashed) {
		t.Fatalf("crashed session: %v", err)
	}
	e.reopen()
	m, err := e.vl.Mount(context.Background(), code(1))
	if err != nil {
		t.Fatal(err)
	}
	if m.Tail != volume.TailTorn || len(m.Index.Segments) != 1 {
		t.Fatalf("after the crash: tail %v, %d segments", m.Tail, len(m.Index.Segments))
	}
	again := [][]byte{data(9, 120000)}
	res2, err := volume.WriteSession(context.Background(), m, e.pool(), named("again", again), volume.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.readBack(res1.Volumes, "pointa", first[0], volume.ReadOptions{})
	e.readBack(res2.Volumes, "againa", again[0], volume.ReadOptions{})
	m, err = e.vl.Mount(context.Background(), code(1))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := m.Scan()
	if err != nil {
		t.Fatal(err)
	}
	// The crashed session's whole blocks stay on tape, uncatalogued; the
	// torn one was overwritten.
	if !rep.IndexMatches || rep.Unindexed != whole-1 || len(rep.Bad) != 0 || len(m.Index.Segments) != 2 {
		t.Fatalf("scan after the append: %+v", rep)
	}
}

// A volume with unexpired data, or WORM with any, is never relabelled.
func TestOverwriteProtection(t *testing.T) {
	e := newEnv(t, 1, 16<<20)
	if err := e.lib.AddCartridge("WORM01", 2, vtl.CartridgeInfo{WORM: true}); err != nil {
		t.Fatal(err)
	}
	for _, bc := range []string{code(1), "WORM01"} {
		p := e.pool()
		p.Allowed = func(b string) bool { return b == bc }
		v, err := p.First(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := volume.WriteSession(context.Background(), v, p, sources([][]byte{data(10, 1000)}), volume.WriteOptions{Retention: time.Hour}); err != nil {
			t.Fatal(err)
		}
		_, err = volume.Label(e.vl.Drive, volume.LabelOptions{Barcode: bc, Pool: "other", BlockSize: blockSize})
		if !errors.Is(err, volume.ErrProtected) {
			t.Fatalf("%s: relabel of unexpired data: %v", bc, err)
		}
		later := time.Now().Add(2 * time.Hour)
		_, err = volume.Label(e.vl.Drive, volume.LabelOptions{Barcode: bc, Pool: "other", BlockSize: blockSize, Now: later})
		if wantWORM := bc == "WORM01"; wantWORM != errors.Is(err, volume.ErrProtected) {
			t.Fatalf("%s: relabel after expiry: %v", bc, err)
		}
	}
}

// A catalogue that does not match the volume is refused with the
// position, not read as data.
func TestReadRefusesWrongCatalogue(t *testing.T) {
	e := newEnv(t, 1, 16<<20)
	v, _ := e.pool().First(context.Background())
	res, err := volume.WriteSession(context.Background(), v, e.pool(), sources([][]byte{data(11, 50000), data(12, 50000)}), volume.WriteOptions{Multiplex: 2})
	if err != nil {
		t.Fatal(err)
	}
	segs := placed(res.Volumes, "pointa")
	segs[0].Extents[0].Pos++ // off by one block
	if _, err := volume.ReadStream(context.Background(), e.vl, segs, io.Discard, volume.ReadOptions{}); err == nil {
		t.Fatal("a wrong catalogue was read")
	}
	segs = placed(res.Volumes, "pointb")
	segs[0].End = false
	if _, err := volume.ReadStream(context.Background(), e.vl, segs, io.Discard, volume.ReadOptions{}); err == nil {
		t.Fatal("a stream without its end was read")
	}
}

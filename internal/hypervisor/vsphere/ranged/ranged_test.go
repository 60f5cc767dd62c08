package ranged

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// memSource is a DiskSource over a byte slice with the extents given.
type memSource struct {
	b   []byte
	ext []hypervisor.Extent
}

func (m memSource) ReadAt(p []byte, off int64) (int, error) { return copy(p, m.b[off:]), nil }
func (m memSource) Size() int64                             { return int64(len(m.b)) }
func (m memSource) Allocated() []hypervisor.Extent          { return m.ext }

func TestPlanPieces(t *testing.T) {
	ext := []hypervisor.Extent{{Offset: 4096, Length: 4096}, {Offset: PieceBytes - 512, Length: PieceBytes + 1024}}
	got := Plan(ext, 3*PieceBytes, false)
	want := []Piece{{Off: 4096, Len: 4096}, {Off: PieceBytes - 512, Len: 512}, {Off: PieceBytes, Len: PieceBytes}, {Off: 2 * PieceBytes, Len: 512}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("data pieces %+v, want %+v", got, want)
	}
	total := int64(0)
	for _, p := range Plan(ext, 3*PieceBytes, true) {
		if p.Off != total {
			t.Fatalf("the pieces with holes do not cover the disk in order: %+v at %d", p, total)
		}
		total += p.Len
	}
	if total != 3*PieceBytes {
		t.Fatalf("the pieces with holes cover %d bytes", total)
	}
}

// TestProgressRunsStayFew: pieces finished out of order by several
// streams keep the journal a few runs long, and it reads back.
func TestProgressRunsStayFew(t *testing.T) {
	dir := t.TempDir()
	pieces := make([]Piece, 1000)
	for i := range pieces {
		pieces[i] = Piece{Off: int64(i) * PieceBytes, Len: PieceBytes}
	}
	p, err := OpenProgress(dir, "vm/vm_0.vmdk", 1000*PieceBytes, pieces)
	if err != nil {
		t.Fatal(err)
	}
	for base := 0; base < 600; base += 4 { // four streams, each batch finished backwards
		if err := p.Record([]int{base + 3, base + 1, base + 2, base}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Record([]int{700, 702}); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int{{0, 600}, {700, 701}, {702, 703}}; !reflect.DeepEqual(p.Runs, want) {
		t.Fatalf("runs %v, want %v", p.Runs, want)
	}
	q, err := OpenProgress(dir, "vm/vm_0.vmdk", 1000*PieceBytes, pieces)
	if err != nil || !reflect.DeepEqual(q.Runs, p.Runs) || !q.Done(599) || q.Done(600) || !q.Done(702) || q.Done(701) {
		t.Fatalf("read back %v, %v", q.Runs, err)
	}
	if st, _ := os.Stat(q.path); st.Size() > 1024 {
		t.Fatalf("the journal of a 1000-Piece disk is %d bytes", st.Size())
	}
	if _, err := OpenProgress(dir, "vm/vm_0.vmdk", 1000*PieceBytes, pieces[:999]); err == nil {
		t.Fatal("progress of other pieces was trusted")
	}
}

// fileTarget is a Target over a file that counts the writes in
// flight at once.
type fileTarget struct {
	*os.File
	mu         sync.Mutex
	now, most  int
	zeroCalled int64
}

func (f *fileTarget) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.now++
	f.most = max(f.most, f.now)
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.now--; f.mu.Unlock() }()
	return f.File.WriteAt(p, off)
}

func (f *fileTarget) ZeroRange(off, n int64) error {
	f.zeroCalled += n
	return Device{F: f.File}.ZeroRange(off, n)
}

// TestRangedWriteZeroesHolesOfAUsedDisk: onto a disk that holds data
// (not fresh), the holes are zeroed in place and the data written; the
// result equals the source.
func TestRangedWriteZeroesHolesOfAUsedDisk(t *testing.T) {
	size := int64(3 * PieceBytes)
	src := memSource{b: make([]byte, size), ext: []hypervisor.Extent{{Offset: PieceBytes / 2, Length: PieceBytes}}}
	for i := src.ext[0].Offset; i < src.ext[0].Offset+src.ext[0].Length; i++ {
		src.b[i] = byte(i)
	}
	path := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xba}, int(size)), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pieces := Plan(src.ext, size, true)
	prog, err := OpenProgress(t.TempDir(), "d", size, pieces)
	if err != nil {
		t.Fatal(err)
	}
	tgt := &fileTarget{File: f}
	st, err := Write(context.Background(), tgt, src, pieces, 4, make(chan struct{}, 2), prog)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, src.b) {
		t.Fatal("the disk does not equal the source")
	}
	if st.Written != PieceBytes || st.Zeroed != size-PieceBytes || tgt.zeroCalled != st.Zeroed {
		t.Fatalf("stats %+v, zeroed through the target %d", st, tgt.zeroCalled)
	}
	if tgt.most > 2 {
		t.Fatalf("%d writes in flight with 2 datastore slots", tgt.most)
	}
}

// meetTarget holds each first write of a Piece until n writes are in
// flight at once, or fails after a while: proof of n streams.
type meetTarget struct {
	fileTarget
	n       int
	arrived int
	once    sync.Once
	all     chan struct{}
}

func (m *meetTarget) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	m.arrived++
	arrived := m.arrived
	m.mu.Unlock()
	if arrived >= m.n {
		m.once.Do(func() { close(m.all) })
	}
	select {
	case <-m.all:
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("only %d writes in flight at once, want %d", arrived, m.n)
	}
	return m.fileTarget.WriteAt(p, off)
}

func TestRangedWriteStreamsInParallel(t *testing.T) {
	size := int64(4 * PieceBytes)
	src := memSource{b: bytes.Repeat([]byte{7}, int(size)), ext: []hypervisor.Extent{{Offset: 0, Length: size}}}
	f, err := os.Create(filepath.Join(t.TempDir(), "disk"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pieces := Plan(src.ext, size, false)
	prog, _ := OpenProgress(t.TempDir(), "d", size, pieces)
	tgt := &meetTarget{fileTarget: fileTarget{File: f}, n: 3, all: make(chan struct{})}
	// No write leaves meetTarget before three are inside it at once, so a
	// Write that returns without error is the proof of three streams; the
	// count after the barrier (fileTarget.most) is not, as the released
	// writes may pass it one by one.
	if _, err := Write(context.Background(), tgt, src, pieces, 3, nil, prog); err != nil {
		t.Fatal(err)
	}
}

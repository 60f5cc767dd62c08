// Package extsort sorts fixed-size records with bounded memory: records are
// buffered up to a budget, sorted, spilled to temporary run files, and
// merged back in order. Garbage collection and verification use it so that
// their memory does not grow with the repository (restic's whole-index-in-
// RAM approach is what this avoids).
//
// Memory: a Sorter's buffer never exceeds its budget (it lives outside the
// Go heap, see mapBuffer), and a merge shares
// the budget among its runs' read buffers (merging in several passes when
// there are too many runs), so sorting any amount of data costs the budget
// plus a few fixed buffers. Ordered keeps records that are already in
// order on disk without sorting them.
//
// Hand-written because it is small and specific: fixed-size byte records
// compared bytewise, with optional de-duplication.
package extsort

import (
	"bufio"
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"golang.org/x/sys/unix"
)

// Sorter accumulates records of Size bytes.
type Sorter struct {
	size    int
	budget  int
	dir     string
	mem     []byte     // the mapped buffer (see mapBuffer), nil until the first Add
	buf     []byte     // mem[:records buffered]
	runs    []*os.File // anonymous files: nothing is left behind by a crash
	closed  bool
	records int64
}

// New returns a sorter for records of size bytes using at most budget
// bytes of memory for buffering; runs are spilled into dir.
func New(size, budget int, dir string) *Sorter {
	budget = max(budget, size*1024)
	return &Sorter{size: size, budget: budget - budget%size, dir: dir}
}

// Add appends one record (copied).
func (s *Sorter) Add(rec []byte) error {
	if len(rec) != s.size {
		return fmt.Errorf("extsort: record of %d bytes, want %d", len(rec), s.size)
	}
	if s.closed {
		return errors.New("extsort: Add after Iterate")
	}
	if s.mem == nil {
		mem, err := mapBuffer(s.budget)
		if err != nil {
			return fmt.Errorf("extsort: %d bytes of sort buffer: %w", s.budget, err)
		}
		s.mem, s.buf = mem, mem[:0]
		runtime.SetFinalizer(s, (*Sorter).Close) // a sorter dropped without Close
	}
	s.buf = append(s.buf, rec...)
	s.records++
	if len(s.buf) == s.budget {
		return s.spill()
	}
	return nil
}

// mapBuffer reserves a sort buffer of n bytes as anonymous memory outside
// the Go heap; pages count towards the process's memory only once records
// are written to them. Outside the heap the buffer never moves or doubles
// as it fills, and it does not raise the garbage collector's target: the
// heap may grow to twice its live size before a collection, so a
// budget-sized buffer inside it would let garbage grow by as much again.
func mapBuffer(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
}

func (s *Sorter) freeBuffer() {
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem, s.buf = nil, nil
	}
}

// Len is the number of records added.
func (s *Sorter) Len() int64 { return s.records }

type recs struct {
	b    []byte
	size int
	tmp  []byte
}

func (r *recs) Len() int { return len(r.b) / r.size }
func (r *recs) Less(i, j int) bool {
	return bytes.Compare(r.b[i*r.size:(i+1)*r.size], r.b[j*r.size:(j+1)*r.size]) < 0
}
func (r *recs) Swap(i, j int) {
	a, b := r.b[i*r.size:(i+1)*r.size], r.b[j*r.size:(j+1)*r.size]
	copy(r.tmp, a)
	copy(a, b)
	copy(b, r.tmp)
}

func (s *Sorter) sortBuf() {
	sort.Sort(&recs{b: s.buf, size: s.size, tmp: make([]byte, s.size)})
}

// tempFile returns an unnamed file in dir (O_TMPFILE): it vanishes when
// closed or when the process dies, so a kill -9 leaves nothing behind.
func tempFile(dir string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), filepath.Join(dir, "(sort run)")), nil
	}
	// Filesystems without O_TMPFILE: create and unlink at once.
	f, err := os.CreateTemp(dir, "coffer-sort-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name()) // unlinked at once; a name left behind only costs space
	return f, nil
}

func (s *Sorter) spill() error {
	s.sortBuf()
	f, err := tempFile(s.dir)
	if err != nil {
		return err
	}
	if _, err := f.Write(s.buf); err != nil {
		_ = f.Close() // the run is dropped with its error
		return err
	}
	s.runs = append(s.runs, f)
	s.buf = s.buf[:0]
	return nil
}

// Merge buffers: a merge reads every run through a buffer of its own, the
// budget shared among them, between minRunBuffer and maxRunBuffer each. More
// runs than the budget allows at minRunBuffer are first merged in groups,
// so a merge never needs more memory than the budget however much was
// sorted.
const (
	minRunBuffer = 16 << 10
	maxRunBuffer = 256 << 10
)

// Iterate calls fn with every record in ascending order (the slice is only
// valid during the call). With unique, equal records are reported once.
// Iterate may be called once; it removes the run files.
func (s *Sorter) Iterate(unique bool, fn func(rec []byte) error) error {
	s.closed = true
	defer s.Close()
	if len(s.runs) == 0 {
		s.sortBuf()
		var prev []byte
		for i := 0; i < len(s.buf); i += s.size {
			rec := s.buf[i : i+s.size]
			if unique && prev != nil && bytes.Equal(prev, rec) {
				continue
			}
			prev = rec
			if err := fn(rec); err != nil {
				return err
			}
		}
		return nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	// The merge reads the runs through the sort buffer, cut into one read
	// buffer per run: its pages are already counted, and outside the Go
	// heap the read buffers neither raise the garbage collector's target
	// nor become garbage after each pass.
	defer s.freeBuffer()
	fanIn := max(2, s.budget/minRunBuffer)
	for len(s.runs) > fanIn {
		f, err := tempFile(s.dir)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, maxRunBuffer)
		err = s.merge(s.runs[:fanIn], unique, func(rec []byte) error { _, err := w.Write(rec); return err })
		if err == nil {
			err = w.Flush()
		}
		for _, r := range s.runs[:fanIn] {
			_ = r.Close() // a consumed run, read only
		}
		s.runs = append(s.runs[fanIn:], f)
		if err != nil {
			return err
		}
	}
	return s.merge(s.runs, unique, fn)
}

// merge reads sorted run files from their start and calls fn in order.
// Each run reads through its own slice of the sort buffer.
func (s *Sorter) merge(runs []*os.File, unique bool, fn func(rec []byte) error) error {
	bufSize := min(max(len(s.mem)/len(runs), minRunBuffer, s.size), maxRunBuffer)
	bufSize -= bufSize % s.size
	mem := s.mem
	if len(mem) < bufSize*len(runs) { // a tiny budget: fanIn is at least 2
		mem = make([]byte, bufSize*len(runs))
	}
	h := &runHeap{}
	for i, f := range runs {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		rr := &run{f: f, buf: mem[i*bufSize : (i+1)*bufSize], size: s.size}
		ok, err := rr.next()
		if err != nil {
			return err
		}
		if ok {
			h.items = append(h.items, rr)
		}
	}
	heap.Init(h)
	prev := make([]byte, 0, s.size)
	for h.Len() > 0 {
		rr := h.items[0]
		if !unique || len(prev) == 0 || !bytes.Equal(prev, rr.rec) {
			if err := fn(rr.rec); err != nil {
				return err
			}
			prev = append(prev[:0], rr.rec...)
		}
		ok, err := rr.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// Close releases the buffer and the run files (Iterate does it too).
func (s *Sorter) Close() {
	for _, f := range s.runs {
		_ = f.Close() // unlinked run files: their data is discarded
	}
	s.runs = nil
	s.freeBuffer()
}

// run reads one sorted run file through buf; rec is the current record,
// a slice of buf valid until the next call.
type run struct {
	f        *os.File
	buf      []byte
	pos, end int
	size     int
	rec      []byte
}

func (r *run) next() (bool, error) {
	if r.end-r.pos < r.size {
		r.end = copy(r.buf, r.buf[r.pos:r.end])
		r.pos = 0
		for r.end < r.size {
			n, err := r.f.Read(r.buf[r.end:])
			r.end += n
			if err == io.EOF {
				if r.end == 0 {
					return false, nil
				}
				if r.end < r.size {
					return false, fmt.Errorf("extsort: read run: %w", io.ErrUnexpectedEOF)
				}
				break
			}
			if err != nil {
				return false, fmt.Errorf("extsort: read run: %w", err)
			}
		}
	}
	r.rec = r.buf[r.pos : r.pos+r.size]
	r.pos += r.size
	return true, nil
}

type runHeap struct{ items []*run }

func (h *runHeap) Len() int           { return len(h.items) }
func (h *runHeap) Less(i, j int) bool { return bytes.Compare(h.items[i].rec, h.items[j].rec) < 0 }
func (h *runHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *runHeap) Push(x any)         { h.items = append(h.items, x.(*run)) }
func (h *runHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// Cursor reads sorted records one at a time (pull style), for merge-joins.
type Cursor struct {
	f   *os.File
	r   *bufio.Reader
	rec []byte
	ok  bool
}

// Cursor sorts the records into a temporary file and returns a cursor
// positioned on the first record. Close it when done.
func (s *Sorter) Cursor(unique bool) (*Cursor, error) {
	f, err := tempFile(s.dir)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, maxRunBuffer)
	if err := s.Iterate(unique, func(rec []byte) error { _, err := w.Write(rec); return err }); err != nil {
		_ = f.Close() // the unlinked file is discarded with the error
		return nil, err
	}
	if err := w.Flush(); err != nil {
		_ = f.Close() // the unlinked file is discarded with the error
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close() // the unlinked file is discarded with the error
		return nil, err
	}
	c := &Cursor{f: f, r: bufio.NewReaderSize(f, 256<<10), rec: make([]byte, s.size)}
	return c, c.Next()
}

// Valid reports whether Record is available.
func (c *Cursor) Valid() bool { return c.ok }

// Record is the current record (valid until Next).
func (c *Cursor) Record() []byte { return c.rec }

// Next advances.
func (c *Cursor) Next() error {
	_, err := io.ReadFull(c.r, c.rec)
	if err == io.EOF {
		c.ok = false
		return nil
	}
	if err != nil {
		c.ok = false
		return fmt.Errorf("extsort: %w", err)
	}
	c.ok = true
	return nil
}

// SeekTo advances to the first record whose first len(key) bytes are >=
// key and reports whether they equal key (a key shorter than a record
// matches on the record's prefix, e.g. a pack ID before its size).
func (c *Cursor) SeekTo(key []byte) (bool, error) {
	for c.ok && bytes.Compare(c.rec[:len(key)], key) < 0 {
		if err := c.Next(); err != nil {
			return false, err
		}
	}
	return c.ok && bytes.Equal(c.rec[:len(key)], key), nil
}

// Close releases the cursor's file.
func (c *Cursor) Close() error { return c.f.Close() }

// Rewind repositions the cursor on the first record.
func (c *Cursor) Rewind() error {
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	c.r.Reset(c.f)
	return c.Next()
}

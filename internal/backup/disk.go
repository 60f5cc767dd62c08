// Package backup streams disks into a repository. It knows nothing of
// hypervisors: a disk is a random-access reader plus what the source knows
// about it (allocated ranges, changed ranges since the previous backup), and
// the result is a complete disk map for a new backup point.
//
// For every chunk-sized span of a disk the pipeline decides, cheapest first:
//
//  1. unchanged since the previous point (change tracking) -> reuse its ID,
//     read nothing;
//  2. unallocated -> a hole (zero ID), read nothing;
//  3. otherwise read only the allocated bytes, and if the span is all zeros
//     -> a hole; else hash it; the same ID as the previous point at this
//     offset -> reuse; known to the repository -> reuse (global dedup);
//     else compress, encrypt and pack it.
//
// Workers (one per CPU by default) run steps 3 in parallel; each owns its
// buffers, hasher and compressor, so memory is a few MiB per worker
// regardless of disk size.
package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/procs"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Disk is one disk to back up.
type Disk struct {
	Key, Name, Kind, Format, Path string
	Reader                        io.ReaderAt
	Size                          int64
	// Allocated lists ranges that may hold data; nil means all of the disk.
	Allocated []hypervisor.Extent
	// Changed lists ranges changed since the point Previous came from;
	// only meaningful when ChangedValid.
	Changed      []hypervisor.Extent
	ChangedValid bool
	// Previous gives the chunk IDs of the same disk in the previous
	// backup point (same size and chunk size), or is nil.
	Previous    Previous
	ChangeToken string
	Mode        string // recorded mode: full, incremental, differential
	Warning     string
}

// RateLimiter throttles reads (an engine-wide or per-task token bucket).
type RateLimiter interface {
	WaitN(ctx context.Context, n int) error
}

// Options tune the pipeline.
type Options struct {
	Workers int // hashing/compressing goroutines; default GOMAXPROCS
	Readers int // concurrent source reads, overlapping the workers; default: about 4 MiB in flight
	// ReadBatch is the most bytes of consecutive spans one source read
	// fetches (default 1 MiB; at least one span).
	ReadBatch int
	Limiter   RateLimiter // nil = unthrottled
	Progress  *Progress   // counters updated while running; may be nil
	// ChangeCheckSpans is how many spans change tracking calls unchanged
	// an incremental reads to check it (changecheck.go); 0 is
	// DefaultChangeCheckSpans, negative turns the check off.
	ChangeCheckSpans int
	// Note, when set, receives informational lines for the task log:
	// how the session reads each disk (hypervisor.Noter).
	Note func(string)
	// Nice, from 1 to 19, runs the pipeline's readers and workers at that
	// CPU niceness, so that VMs on the same host come first (nice.go); 0
	// leaves them at the process's.
	Nice int
}

// Progress counts work as it happens; readers poll it.
type Progress struct {
	BytesTotal  atomic.Int64 // logical bytes of all disks
	BytesDone   atomic.Int64 // logical bytes processed
	BytesRead   atomic.Int64
	BytesNew    atomic.Int64 // plaintext of new chunks
	BytesStored atomic.Int64 // sealed bytes of new chunks
	// SetupNanos is how long opening a VM's frozen disks took (NBD or
	// session setup, allocation maps, change sets): a fixed cost per VM
	// the planner (internal/plan) needs apart from the transfer.
	SetupNanos atomic.Int64
	// TransferNanos is how long reading, storing and committing its
	// disks took after that.
	TransferNanos atomic.Int64
}

// ErrSourceChanged means the source shrank or failed to deliver bytes that
// it claimed to have; the backup point would be wrong, so it is not written.
var ErrSourceChanged = errors.New("source changed during backup")

// diskResult is what backing up one disk produced.
type diskResult struct {
	spans     int // IDs passed to the disk map, one per span
	deps      []*repo.Pending
	bytesRead int64
	bytesZero int64
	bytesNew  int64
	sealed    int64 // bytes of new blobs (what the repository grows by, before pack overhead)
	chunksNew int
	// checked spans change tracking called unchanged were read to check
	// it; differ of them had changed.
	checked, differ int
}

// work is a run of consecutive spans to read: span i at off, then the
// next ones, length bytes in all.
type work struct {
	i      int
	off    int64
	length int
	spans  int
}

// span is one span whose bytes a reader has fetched.
type span struct {
	work
	data  []byte
	read  int         // bytes actually read (allocated ranges)
	owner *readBuffer // data is part of it; released after processing
}

// idAdder takes the chunk IDs of a disk's spans in order: the disk map
// being written (repo.DiskMapWriter).
type idAdder interface {
	Add(id.ID) error
}

// backupDisk runs the pipeline for one disk, passing its chunk IDs to
// idmap in span order as they are known.
func backupDisk(ctx context.Context, w *repo.Writer, st *repo.Stream, d Disk, o Options, idmap idAdder) (*diskResult, error) {
	cfg := w.Repository().Config()
	cs := cfg.ChunkSize
	n := int((d.Size + int64(cs) - 1) / int64(cs))
	res := &diskResult{}
	prev := d.Previous
	if prev != nil && prev.Len() != n {
		prev = nil
	}
	workers := o.Workers
	if workers <= 0 {
		workers = procs.Working()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	perRead := spansPerRead(cs, o.ReadBatch)
	readers := o.Readers
	if readers <= 0 {
		// Enough reads in flight to cover about 4 MiB: with small chunks
		// a source with latency (NBD) is otherwise waited for, not read.
		readers = max(workers, min(16, (4<<20)/(cs*perRead)))
	}
	// Readers fetch runs of spans while workers hash, compress and store
	// others: a source with latency (NBD from a hypervisor, a disk not in
	// cache) is read at the same time as the CPU works. Buffers circulate
	// through pool, so memory is (readers + workers) reads, whatever the
	// disk size.
	jobs := make(chan work, workers*2)
	filled := make(chan span, workers*perRead)
	pool := newReadPool(readers+workers, cs*perRead)
	var (
		errOnce  sync.Once
		firstErr error
		wg, rwg  sync.WaitGroup
		mu       sync.Mutex
	)
	setErr := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	spans := o.ChangeCheckSpans
	if spans == 0 {
		spans = DefaultChangeCheckSpans
	}
	sample := checkSample(d, prev, n, cs, spans)
	order := newIDOrder(ctx, prev, func(i int, x id.ID) error {
		if sample[i] {
			was, err := prev.At(ctx, i)
			if err != nil {
				return err
			}
			res.checked++
			if x != was {
				res.differ++
			}
		}
		return idmap.Add(x)
	})
	var niceOnce sync.Once
	lowerPriority := func() (restore func()) {
		if o.Nice <= 0 {
			return func() {}
		}
		restore, err := lowerThreadPriority(o.Nice)
		if err != nil && o.Note != nil {
			niceOnce.Do(func() { o.Note(d.Name + ": " + err.Error()) })
		}
		return restore
	}
	for range readers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			defer lowerPriority()()
			rd := &spanReader{d: d, o: o, alloc: newCursor(d.Allocated, d.Size)}
			for j := range jobs {
				b := pool.get(ctx)
				if b == nil {
					return
				}
				n, err := rd.readSpan(ctx, b.buf[:j.length], j.off)
				if err != nil {
					setErr(err)
					return
				}
				b.refs.Store(int32(j.spans))
				for m := range j.spans {
					from := m * cs
					to := min(from+cs, j.length)
					sp := span{work: work{i: j.i + m, off: j.off + int64(from), length: to - from, spans: 1},
						data: b.buf[from:to:to], owner: b}
					if m == 0 {
						sp.read = n // the run's bytes read, counted once
					}
					select {
					case filled <- sp:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	go func() { rwg.Wait(); close(filled) }()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer lowerPriority()()
			wk, err := newWorker(w, st, d, prev, o, order)
			if err != nil {
				setErr(err)
				return
			}
			for sp := range filled {
				err := wk.process(ctx, sp)
				sp.owner.release()
				if err != nil {
					setErr(err)
					return
				}
			}
			mu.Lock()
			res.deps = append(res.deps, wk.deps...)
			res.bytesRead += wk.read
			res.bytesZero += wk.zero
			res.bytesNew += wk.new
			res.sealed += wk.sealed
			res.chunksNew += wk.chunks
			mu.Unlock()
		}()
	}
	alloc := newCursor(d.Allocated, d.Size)
	changed := changedCursor(d)
	runs := &batcher{max: perRead, out: jobs}
	var zero int64
	// unchanged reports whether span i keeps the previous point's ID
	// without being read, and that ID. A span whose previous chunk is lost
	// is read again even when change tracking says it did not change:
	// storing it again mends the damage.
	unchanged := func(i int, off int64, length int) (id.ID, bool, error) {
		if !d.ChangedValid || prev == nil || changed.overlaps(off, int64(length)) || sample[i] {
			return id.ID{}, false, nil
		}
		x, err := prev.At(ctx, i)
		if err != nil {
			return id.ID{}, false, err
		}
		lost, err := w.Suspect(ctx, x)
		return x, !lost, err
	}
feed:
	for i := range n {
		off := int64(i) * int64(cs)
		length := int(min(int64(cs), d.Size-off))
		was, same, err := unchanged(i, off, length)
		if err != nil {
			setErr(err)
			break feed
		}
		kind := spanRead
		switch {
		case same:
			kind = spanPrev
			if was.IsZero() {
				zero += int64(length)
			}
		case !alloc.overlaps(off, int64(length)):
			kind = spanHole
			zero += int64(length)
		}
		if order.full() {
			runs.flush(ctx) // the spans the order waits for go to the workers
			if err := order.waitRoom(ctx); err != nil {
				setErr(err)
				break feed
			}
		}
		if err := order.feed(i, kind); err != nil {
			setErr(err)
			break feed
		}
		if kind != spanRead {
			o.Progress.add(length, 0)
			continue
		}
		if !runs.add(ctx, work{i: i, off: off, length: length, spans: 1}) {
			break feed
		}
	}
	runs.flush(ctx)
	close(jobs)
	wg.Wait()
	rwg.Wait() // readers use d.Reader, which the caller closes after return
	pool.close()
	res.bytesZero += zero
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if res.spans = order.passed(); res.spans != n {
		return nil, fmt.Errorf("backup of %s: %d of %d chunk IDs known at the end (a bug)", d.Name, res.spans, n)
	}
	return res, nil
}

func (p *Progress) add(done, read int) {
	if p != nil {
		p.BytesDone.Add(int64(done))
		p.BytesRead.Add(int64(read))
	}
}

// zeroBlock is what spans are compared with, a block at a time, to find
// all-zero ones. It is never written, so its pages stay the kernel's shared
// zero page. It replaced a zero buffer of repo.MaxChunkSize (16 MiB) on the
// heap: allocated after the key derivation had freed its 32 MiB, that
// buffer reused those pages, had to be cleared, and so stayed resident,
// 16 MiB of a backup's peak RSS (docs/benchmarks.md, session of
// 2026-12-06, issue 42).
var zeroBlock [64 << 10]byte

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// worker owns the per-goroutine state of the pipeline.
type worker struct {
	w      *repo.Writer
	st     *repo.Stream
	d      Disk
	prev   Previous
	o      Options
	order  *idOrder
	out    []byte
	enc    *repo.Encoder
	hasher interface{ Sum([]byte) id.ID }
	deps   []*repo.Pending
	read   int64
	zero   int64
	new    int64
	sealed int64
	chunks int
}

func newWorker(w *repo.Writer, st *repo.Stream, d Disk, prev Previous, o Options, order *idOrder) (*worker, error) {
	r := w.Repository()
	enc, err := r.NewEncoder()
	if err != nil {
		return nil, err
	}
	return &worker{w: w, st: st, d: d, prev: prev, o: o, order: order, enc: enc, hasher: r.Key().NewHasher()}, nil
}

func (k *worker) process(ctx context.Context, j span) error {
	data, read := j.data, j.read
	k.read += int64(read)
	if allZero(data) {
		k.zero += int64(len(data))
		k.o.Progress.add(j.length, read)
		return k.order.set(j.i, id.ID{}) // a hole
	}
	x := k.hasher.Sum(data)
	if err := k.order.set(j.i, x); err != nil {
		return err
	}
	if same, err := k.samePrevious(ctx, j.i, x); err != nil {
		return err
	} else if same {
		k.o.Progress.add(j.length, read)
		return nil
	}
	p, owner, err := k.w.Claim(ctx, x)
	if err != nil {
		return err
	}
	if p != nil {
		k.deps = append(k.deps, p)
	}
	if owner {
		k.out, _ = k.enc.Encode(k.out[:0], data)
		if err := k.st.Add(ctx, x, k.out, len(data), p); err != nil {
			return err
		}
		k.new += int64(len(data))
		k.sealed += int64(len(k.out))
		k.chunks++
		if k.o.Progress != nil {
			k.o.Progress.BytesNew.Add(int64(len(data)))
			k.o.Progress.BytesStored.Add(int64(len(k.out)))
		}
	}
	k.o.Progress.add(j.length, read)
	return nil
}

// spanReader is one reader goroutine's state.
type spanReader struct {
	d     Disk
	o     Options
	alloc *cursor
}

// readSpan fills data with the span at off, reading only allocated ranges
// and zero-filling the rest. It returns the number of bytes read.
func (k *spanReader) readSpan(ctx context.Context, data []byte, off int64) (int, error) {
	read := 0
	end := off + int64(len(data))
	pos := off
	for _, e := range k.alloc.within(off, end) {
		if e.Offset > pos {
			clear(data[pos-off : e.Offset-off])
		}
		seg := data[e.Offset-off : e.Offset-off+e.Length]
		if k.o.Limiter != nil {
			if err := k.o.Limiter.WaitN(ctx, len(seg)); err != nil {
				return read, err
			}
		}
		n, err := k.d.Reader.ReadAt(seg, e.Offset)
		if n < len(seg) {
			if err == nil || errors.Is(err, io.EOF) {
				return read, fmt.Errorf("%w: %s: read %d of %d bytes at offset %d (the disk shrank or was truncated?)",
					ErrSourceChanged, k.d.Name, n, len(seg), e.Offset)
			}
			return read, fmt.Errorf("read %s at offset %d: %w", k.d.Name, e.Offset, err)
		}
		read += n
		pos = e.Offset + e.Length
	}
	if pos < end {
		clear(data[pos-off:])
	}
	return read, nil
}

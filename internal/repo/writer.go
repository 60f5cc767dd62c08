package repo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// Writer stores new chunks for the backups of one process (one session):
// many streams (one per disk being read) append to their own packs, while
// deduplication is global: a chunk already in the index, or claimed by any
// stream of this session, is never stored twice.
//
// Durability protocol: a pack is committed in the background when full;
// Commit of a backup first waits until every pack holding a chunk the
// backup references is committed, then writes an index segment for all
// committed packs not yet indexed, and only then the manifest.
type Writer struct {
	// ctx outlives individual calls: packs are written and committed in the
	// background under it. It is cancelled when the writer fails or closes.
	ctx     context.Context
	cancel  context.CancelFunc
	r       *Repository
	lease   *Lease
	session pack.SessionPrefix
	seq     atomic.Uint32
	mapSeq  atomic.Uint32

	mu        sync.Mutex
	pending   map[id.ID]*Pending
	unflushed []index.Entry
	failed    error

	flushMu   sync.Mutex
	commitSem chan struct{}
	commits   sync.WaitGroup

	ledger lockLedger

	lostOnce sync.Once
	lost     map[id.ID]bool
	lostErr  error

	stored     atomic.Int64 // sealed bytes committed in packs
	newChunks  atomic.Int64
	newRaw     atomic.Int64
	packsTotal atomic.Int64
}

// Pending is a chunk claimed by this session: being stored, or stored in a
// pack that may not be committed yet.
type Pending struct {
	id    id.ID
	ready chan struct{} // closed once the blob is in a pack (or the writer failed)
	once  sync.Once
	pack  *openPack
	loc   index.Location
}

func (p *Pending) markReady() { p.once.Do(func() { close(p.ready) }) }

type openPack struct {
	id      pack.ID
	obj     store.ObjectWriter
	pw      *pack.Writer
	stream  *Stream
	members []*Pending
	done    chan struct{} // closed when committed or failed
	err     error
}

// NewWriter opens a write session: it recovers packs of dead sessions (so an
// interrupted backup's chunks are reused, not stored again), then takes a
// lease naming this session.
func (r *Repository) NewWriter(ctx context.Context, desc string) (*Writer, error) {
	return r.NewWriterFor(ctx, "", desc)
}

// NewWriterFor is NewWriter for a session whose lease names its owner
// (LeaseInfo.Owner), which EndSessionsOf can then declare dead at once.
func (r *Repository) NewWriterFor(ctx context.Context, owner, desc string) (*Writer, error) {
	if _, err := r.RecoverDeadSessions(ctx); err != nil {
		return nil, fmt.Errorf("recover interrupted sessions: %w", err)
	}
	w := &Writer{r: r, pending: map[id.ID]*Pending{}}
	if _, err := rand.Read(w.session[:]); err != nil {
		return nil, err
	}
	info := r.newLeaseInfo("backup", w.session.String(), desc)
	info.Owner = owner
	lease, err := r.acquireLease(ctx, info, false)
	if err != nil {
		return nil, err
	}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	w.lease = lease
	conns := max(r.st.Properties().Connections, 1)
	w.commitSem = make(chan struct{}, conns)
	go func() {
		select {
		case <-lease.Lost():
			w.fail(lease.Err())
		case <-lease.done:
		}
	}()
	return w, nil
}

// Suspect reports whether a backup must not reuse chunk x without reading
// its span again: x is recorded lost (no good copy left), or it is the
// marker of a span a repair could not keep. Reading the span again stores
// the chunk again, which mends every point that uses it.
func (w *Writer) Suspect(ctx context.Context, x id.ID) (bool, error) {
	if x == LostChunk {
		return true, nil
	}
	w.lostOnce.Do(func() { w.lost, w.lostErr = w.r.LostChunks(ctx) })
	return w.lost[x], w.lostErr
}

// Session is this writer's session prefix.
func (w *Writer) Session() pack.SessionPrefix { return w.session }

// Repository returns the repository written to.
func (w *Writer) Repository() *Repository { return w.r }

func (w *Writer) fail(err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return
	}
	w.failed = err
	w.cancel()
	// Wake everyone waiting on chunks that will now never be stored.
	for _, p := range w.pending {
		if p.pack == nil {
			p.markReady()
		}
	}
}

// Err returns the writer's sticky failure.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// Claim decides whether chunk x must be stored. It returns (nil, nil) when
// the chunk is durable in the index already; otherwise a Pending and
// whether the caller now owns it. The owner must pass it to Stream.Add (or
// the writer fails); a non-owner only records it as a dependency.
func (w *Writer) Claim(ctx context.Context, x id.ID) (*Pending, bool, error) {
	w.mu.Lock()
	if err := w.failed; err != nil {
		w.mu.Unlock()
		return nil, false, err
	}
	if p, ok := w.pending[x]; ok {
		w.mu.Unlock()
		return p, false, nil
	}
	w.mu.Unlock()
	_, found, err := w.r.Index().Lookup(ctx, x)
	if err != nil && !errors.Is(err, index.ErrFormat) && !errors.Is(err, store.ErrInvalidRange) {
		return nil, false, err
	}
	// A chunk behind a damaged index block counts as absent: storing it
	// again is cheaper than failing the backup, and never builds on damage.
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.pending[x]; ok { // claimed while we looked
		return p, false, nil
	}
	if found {
		return nil, false, nil
	}
	p := &Pending{id: x, ready: make(chan struct{})}
	w.pending[x] = p
	return p, true, nil
}

// Move stores an already sealed blob again, in a pack of this stream: the
// garbage collector's repack. It bypasses deduplication on purpose (the
// chunk exists, in a pack about to be deleted).
func (s *Stream) Move(ctx context.Context, x id.ID, sealed []byte, rawLen int) error {
	p := &Pending{id: x, ready: make(chan struct{})}
	return s.Add(ctx, x, sealed, rawLen, p)
}

// Stream appends chunks to packs of its own. A stream is used by one
// backup (one disk) and is safe for its concurrent workers.
type Stream struct {
	w      *Writer
	mu     sync.Mutex
	cur    *openPack
	retain time.Time // object lock for the packs of this stream
}

// NewStream returns a stream.
func (w *Writer) NewStream() *Stream { return &Stream{w: w} }

// NewRetainedStream returns a stream whose packs are immutable until the
// given time on backends with retention (S3 Object Lock).
func (w *Writer) NewRetainedStream(until time.Time) *Stream {
	return &Stream{w: w, retain: lockUntil(until)}
}

// Add stores a sealed chunk blob the caller owns (see Claim).
func (s *Stream) Add(ctx context.Context, x id.ID, sealed []byte, rawLen int, p *Pending) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.w.Err(); err != nil {
		return err
	}
	if s.cur == nil {
		if err := s.open(ctx); err != nil {
			s.w.fail(err)
			return err
		}
	}
	e, err := s.cur.pw.Add(x, sealed, rawLen)
	if err != nil {
		err = fmt.Errorf("write pack %s: %w", s.cur.id, err)
		s.w.fail(err)
		return err
	}
	p.pack = s.cur
	p.loc = index.Location{Pack: s.cur.id, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength}
	p.markReady()
	s.cur.members = append(s.cur.members, p)
	s.w.newChunks.Add(1)
	s.w.newRaw.Add(int64(rawLen))
	if s.cur.pw.Size() >= int64(s.w.r.cfg.PackSize) {
		return s.rotateLocked(ctx)
	}
	return nil
}

func (s *Stream) open(ctx context.Context) error {
	pid := pack.MakeID(s.w.session, s.w.seq.Add(1))
	obj, err := s.w.r.st.Create(s.w.ctx, pack.ObjectName(pid), store.PutOptions{SizeHint: int64(s.w.r.cfg.PackSize), RetainUntil: s.retain})
	if err != nil {
		return fmt.Errorf("create pack: %w", err)
	}
	pw, err := pack.NewWriter(obj, s.w.r.key)
	if err != nil {
		_ = obj.Abort()
		return fmt.Errorf("write pack header: %w", err)
	}
	s.cur = &openPack{id: pid, obj: obj, pw: pw, stream: s, done: make(chan struct{})}
	return nil
}

// rotateLocked hands the current pack to a committer. It blocks while
// too many commits are in flight, which bounds memory on slow backends.
func (s *Stream) rotateLocked(ctx context.Context) error {
	p := s.cur
	if p == nil {
		return nil
	}
	s.cur = nil
	select {
	case s.w.commitSem <- struct{}{}:
	case <-ctx.Done():
		s.w.abandon(p, ctx.Err())
		return ctx.Err()
	}
	s.w.commits.Add(1)
	go s.w.commitPack(p)
	return nil
}

// Flush commits the stream's open pack, if any.
func (s *Stream) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rotateLocked(ctx)
}

func (s *Stream) flushIfCurrent(ctx context.Context, p *openPack) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != p {
		return nil
	}
	return s.rotateLocked(ctx)
}

func (w *Writer) abandon(p *openPack, err error) {
	_ = p.obj.Abort()
	p.err = err
	close(p.done)
	w.fail(err)
}

func (w *Writer) commitPack(p *openPack) {
	defer w.commits.Done()
	defer func() { <-w.commitSem }()
	err := p.pw.Finish()
	var fi store.ObjectInfo
	if err == nil {
		fi, err = p.obj.Commit()
	} else {
		_ = p.obj.Abort()
	}
	if err != nil {
		p.err = fmt.Errorf("commit pack %s: %w", p.id, err)
		w.fail(p.err)
		close(p.done)
		return
	}
	w.stored.Add(fi.Size)
	w.packsTotal.Add(1)
	w.mu.Lock()
	for _, m := range p.members {
		w.unflushed = append(w.unflushed, index.Entry{ID: m.id, Location: m.loc})
	}
	w.mu.Unlock()
	close(p.done)
}

// Sync waits until every chunk in deps is in a committed pack, forcing
// open packs of other streams to commit early if needed.
func (w *Writer) Sync(ctx context.Context, deps []*Pending) error {
	for _, d := range deps {
		select {
		case <-d.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		if d.pack == nil {
			return w.Err()
		}
		select {
		case <-d.pack.done:
		default:
			if err := d.pack.stream.flushIfCurrent(ctx, d.pack); err != nil {
				return err
			}
			select {
			case <-d.pack.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if d.pack.err != nil {
			return d.pack.err
		}
	}
	return w.Err()
}

// Flush writes one index segment for every committed pack not yet indexed,
// and adds it to the repository's index.
func (w *Writer) Flush(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	entries := w.unflushed
	w.unflushed = nil
	w.mu.Unlock()
	if len(entries) == 0 {
		return nil
	}
	seg, err := index.WriteSegment(ctx, w.r.st, w.r.key, entries, nil)
	if err != nil {
		w.mu.Lock()
		w.unflushed = append(entries, w.unflushed...)
		w.mu.Unlock()
		return fmt.Errorf("write index segment: %w", err)
	}
	w.r.Index().Add(seg)
	w.mu.Lock()
	for _, e := range entries {
		delete(w.pending, e.ID) // now found through the index
	}
	w.mu.Unlock()
	return nil
}

// WriteDiskMap stores the disk map of one disk and returns its name;
// retain (zero for none) makes it immutable on backends with retention.
func (w *Writer) WriteDiskMap(ctx context.Context, diskSize int64, chunkSize int, ids []id.ID, retain time.Time) (string, error) {
	mw, err := w.CreateDiskMap(ctx, diskSize, chunkSize, retain)
	if err != nil {
		return "", err
	}
	for _, x := range ids {
		if err := mw.Add(x); err != nil {
			mw.Abort()
			return "", err
		}
	}
	return mw.Commit()
}

// DiskMapWriter streams the disk map of one disk into the store, an ID at
// a time in span order, so that a backup holds the IDs in flight rather
// than one per span of the disk (8 MiB for 64 GiB at 256 KiB chunks;
// docs/benchmarks.md, issue 42). Nothing is visible before Commit.
type DiskMapWriter struct {
	name string
	obj  store.ObjectWriter
	mw   *diskmap.Writer
}

// CreateDiskMap starts the disk map of a disk of diskSize bytes;
// retain (zero for none) makes it immutable on backends with retention.
func (w *Writer) CreateDiskMap(ctx context.Context, diskSize int64, chunkSize int, retain time.Time) (*DiskMapWriter, error) {
	name := fmt.Sprintf("maps/%s-%08x", w.session, w.mapSeq.Add(1))
	obj, err := w.r.st.Create(ctx, name, store.PutOptions{RetainUntil: lockUntil(retain)})
	if err != nil {
		return nil, err
	}
	mw, err := diskmap.NewWriter(obj, w.r.key, diskSize, chunkSize)
	if err != nil {
		_ = obj.Abort()
		return nil, fmt.Errorf("write disk map: %w", err)
	}
	return &DiskMapWriter{name: name, obj: obj, mw: mw}, nil
}

// Add appends the ID of the next span.
func (m *DiskMapWriter) Add(x id.ID) error {
	if err := m.mw.Add(x); err != nil {
		return fmt.Errorf("write disk map: %w", err)
	}
	return nil
}

// Commit writes the footer (every span must have its ID) and makes the
// map durable; it returns the map's name.
func (m *DiskMapWriter) Commit() (string, error) {
	if err := m.mw.Finish(); err != nil {
		_ = m.obj.Abort()
		return "", fmt.Errorf("write disk map: %w", err)
	}
	if _, err := m.obj.Commit(); err != nil {
		return "", fmt.Errorf("commit disk map: %w", err)
	}
	return m.name, nil
}

// Abort discards the map. Safe after Commit (no-op).
func (m *DiskMapWriter) Abort() { _ = m.obj.Abort() }

// Commit makes a backup point durable: its dependencies are committed and
// indexed, then its manifest is written. The snapshot's ID is assigned here.
func (w *Writer) Commit(ctx context.Context, s *Point, deps []*Pending) error {
	if err := w.Sync(ctx, deps); err != nil {
		return err
	}
	if err := w.Flush(ctx); err != nil {
		return err
	}
	if err := w.lease.Check(ctx); err != nil {
		return err
	}
	// A cancelled backup (a job cancelled, a fenced worker) leaves no
	// point, whether or not the store heeds ctx (a local disk's writes do
	// not): its packs stay, indexed, for the retry to reuse.
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("commit point: %w", err)
	}
	if s.ID.IsZero() {
		s.ID = id.Random()
	}
	return w.r.saveSnapshot(ctx, s)
}

// Close ends the session: open streams must have been flushed by their
// owners; Close waits for pack commits, indexes what was committed (also
// after a failure, so a re-run reuses those chunks) and releases the lease.
func (w *Writer) Close(ctx context.Context) error {
	w.commits.Wait()
	if err := w.Flush(ctx); err != nil {
		// Committed packs are not indexed: keep the lease so the next
		// session recovers them instead of storing their chunks again.
		w.lease.Abandon()
		w.cancel()
		return err
	}
	lerr := w.lease.Release(ctx)
	w.cancel()
	return lerr
}

// WriterStats are cumulative counters of a session.
type WriterStats struct {
	Stored    int64 // bytes added to the store in packs
	NewChunks int64
	NewBytes  int64 // plaintext bytes of new chunks
	Packs     int64
}

// Stats returns the session counters.
func (w *Writer) Stats() WriterStats {
	return WriterStats{Stored: w.stored.Load(), NewChunks: w.newChunks.Load(), NewBytes: w.newRaw.Load(), Packs: w.packsTotal.Load()}
}

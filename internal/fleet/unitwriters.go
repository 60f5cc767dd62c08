package fleet

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
)

// unitWriters are the write sessions a worker's units of one repository
// share, one per job, as the engine in a server's process shares one
// session among a job's VMs. A session per unit cost the worker a listing
// of the repository's whole index per unit (its lease's refresh: each
// point commits an index segment, so the listing grows by one per VM
// backed up), a third of its CPU in the 1,000-VM benchmark.
//
// Sharing changes nothing a reader sees: a point is committed with its
// packs indexed (repo.Writer.Commit), whichever session wrote it. A
// session stays open writerIdle after its last unit (the next unit of
// the job usually comes sooner), and a failed unit's session is closed at
// once and not shared again: its committed packs are indexed for the
// retry, and a session the leader ended (a fenced worker) is never
// reused.
type unitWriters struct {
	mu     sync.Mutex
	open   sync.Mutex // serialises opening, so a job's units open one session
	byJob  map[int64]*jobWriter
	closed bool
}

// jobWriter is a job's session on one repository and its units using it.
type jobWriter struct {
	w     *repo.Writer
	job   int64
	users int
	// gone: no longer shared (failed, or idle and closing); the last user
	// closes it.
	gone bool
	idle *time.Timer
}

// writerIdle is how long a job's session stays open without a unit.
const writerIdle = 2 * time.Second

func newUnitWriters() *unitWriters { return &unitWriters{byJob: map[int64]*jobWriter{}} }

// writer is job's session on r, opened (as owner, described by desc) if
// there is none to share; done gives it back, with the unit's error.
func (u *unitWriters) writer(ctx context.Context, r *repo.Repository, job int64, owner, desc string) (*repo.Writer, func(error) error, error) {
	if jw := u.share(job); jw != nil {
		return jw.w, func(err error) error { return u.done(jw, err) }, nil
	}
	u.open.Lock()
	defer u.open.Unlock()
	if jw := u.share(job); jw != nil { // opened by another unit meanwhile
		return jw.w, func(err error) error { return u.done(jw, err) }, nil
	}
	// The session outlives this unit's context (its VM timeout).
	w, err := r.NewWriterFor(context.WithoutCancel(ctx), owner, desc)
	if err != nil {
		return nil, nil, err
	}
	jw := &jobWriter{w: w, job: job, users: 1}
	u.mu.Lock()
	if u.closed || job == 0 {
		jw.gone = true // not shared: closed when this unit ends
	} else {
		u.byJob[job] = jw
	}
	u.mu.Unlock()
	return w, func(err error) error { return u.done(jw, err) }, nil
}

// share is job's open session, with one more user, if it is sound.
func (u *unitWriters) share(job int64) *jobWriter {
	u.mu.Lock()
	defer u.mu.Unlock()
	jw := u.byJob[job]
	if jw == nil || jw.gone {
		return nil
	}
	if jw.w.Err() != nil { // its lease was lost or ended
		u.forget(jw)
		return nil
	}
	jw.users++
	if jw.idle != nil {
		jw.idle.Stop()
		jw.idle = nil
	}
	return jw
}

// forget stops sharing jw. Called with u.mu held.
func (u *unitWriters) forget(jw *jobWriter) {
	jw.gone = true
	if u.byJob[jw.job] == jw {
		delete(u.byJob, jw.job)
	}
}

// done gives a unit's session back. After a failed unit, it is not
// shared again, and its committed packs are indexed at once (Flush) so
// that a retry anywhere reuses them; its last user closes it.
func (u *unitWriters) done(jw *jobWriter, unitErr error) error {
	var flushErr error
	if unitErr != nil {
		flushErr = jw.w.Flush(context.Background())
	}
	u.mu.Lock()
	jw.users--
	if unitErr != nil {
		u.forget(jw)
	}
	last := jw.users == 0
	if last && !jw.gone {
		jw.idle = time.AfterFunc(writerIdle, func() { u.closeIdle(jw) })
	}
	closeNow := last && jw.gone
	u.mu.Unlock()
	if closeNow {
		return errors.Join(flushErr, jw.w.Close(context.Background()))
	}
	return flushErr
}

// closeIdle closes jw if no unit took it up since its idle timer started.
func (u *unitWriters) closeIdle(jw *jobWriter) {
	u.mu.Lock()
	if jw.users > 0 || jw.gone {
		u.mu.Unlock()
		return
	}
	u.forget(jw)
	u.mu.Unlock()
	_ = jw.w.Close(context.Background()) // its units' points are committed and indexed already
}

// close closes every session no unit uses, and stops sharing the others
// (their last unit closes them): the worker is stopping.
func (u *unitWriters) close(ctx context.Context) error {
	u.mu.Lock()
	u.closed = true
	var idle []*jobWriter
	for _, jw := range u.byJob {
		u.forget(jw)
		if jw.users == 0 {
			if jw.idle != nil {
				jw.idle.Stop()
			}
			idle = append(idle, jw)
		}
	}
	u.mu.Unlock()
	var errs []error
	for _, jw := range idle {
		errs = append(errs, jw.w.Close(ctx))
	}
	return errors.Join(errs...)
}

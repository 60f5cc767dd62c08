package job

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// A job's log lines and progress samples make most of a shared catalog's
// notices (each batch of lines a worker appends is one), and a process
// wants them only for the jobs its subscribers follow that run elsewhere:
// a job's own handle publishes its own, and a cancel request has a notice
// of its own. So a catalog that can (PostgreSQL) sends them apart, and
// the watcher listens for them only while such a subscription exists,
// and lineLinger after the last ends (a console going from one job to
// the next does not reconnect at each). Every time the listening starts
// the catalog first delivers a resync once it holds: the watcher then
// reads what its subscribers follow, and misses no line appended before.

// lineWatcher is a catalog that sends the notices of lines apart
// (catalog.LineNotice): WatchJobLines delivers them until ctx ends, a
// resync first once listening holds.
type lineWatcher interface {
	WatchJobLines(ctx context.Context) (<-chan catalog.JobNotice, error)
}

// lineWatcherOf is the catalog's lineWatcher, looked for through the
// wrappers that unwrap (a process's catalog kept open); nil when it has
// none (its notices of lines, if any, come with the others).
func lineWatcherOf(c catalog.Catalog) lineWatcher {
	for c != nil {
		if w, ok := c.(lineWatcher); ok {
			return w
		}
		u, ok := c.(interface{ Unwrap() catalog.Catalog })
		if !ok {
			return nil
		}
		c = u.Unwrap()
	}
	return nil
}

// lineLinger is how long the watcher keeps listening for lines after the
// last subscription that wanted them ended.
var lineLinger = 10 * time.Second

// lineListener is the watcher's listening for lines: C is nil while it
// does not listen, on is set from its first notice (the listening holds).
// Only the watcher's goroutine uses it.
type lineListener struct {
	m      *Manager
	w      lineWatcher
	C      <-chan catalog.JobNotice
	cancel context.CancelFunc
	idle   *time.Timer // runs while listening for nobody
	on     *atomic.Bool
}

func (m *Manager) newLineListener() *lineListener {
	return &lineListener{m: m, w: lineWatcherOf(m.cat), on: &m.linesOn}
}

// wantsLines reports whether a subscription here may want lines of another
// process: one to every job, or to a job not run here.
func (m *Manager) wantsLines() bool {
	ids, all := m.hub.followed()
	if all {
		return true
	}
	for _, id := range ids {
		if m.handle(id) == nil {
			return true
		}
	}
	return false
}

// update starts listening when wanted, and stops lineLinger after it no
// longer is (expired: the linger's timer fired).
func (l *lineListener) update(expired bool) {
	if l.w == nil {
		return
	}
	want := l.m.wantsLines()
	switch {
	case want && l.C == nil:
		ctx, cancel := context.WithCancel(l.m.ctx)
		c, err := l.w.WatchJobLines(ctx)
		if err != nil {
			cancel()
			l.m.log.Warn("listening for the log lines of other processes' tasks failed", "err", err)
			return
		}
		l.C, l.cancel = c, cancel
	case want:
		l.stopIdle()
	case l.C != nil && expired:
		l.stop()
	case l.C != nil && l.idle == nil:
		l.idle = time.NewTimer(lineLinger)
	}
}

// idleC fires when the listening has lingered for nobody long enough.
func (l *lineListener) idleC() <-chan time.Time {
	if l.idle == nil {
		return nil
	}
	return l.idle.C
}

func (l *lineListener) stopIdle() {
	if l.idle != nil {
		l.idle.Stop()
		l.idle = nil
	}
}

// stop stops listening (the catalog's channel closes on its own).
func (l *lineListener) stop() {
	l.stopIdle()
	if l.cancel != nil {
		l.cancel()
	}
	l.C, l.cancel = nil, nil
	l.on.Store(false)
}

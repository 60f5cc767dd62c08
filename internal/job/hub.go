package job

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Event types.
const (
	EventStatus   = "status"   // created, started, cancel requested, finished: Record holds the job
	EventProgress = "progress" // a progress sample: Record holds the job
	EventLog      = "log"      // a line of the log: Line
)

// Event is what a subscriber receives.
type Event struct {
	Type  string
	JobID int64
	Job   Record // for status and progress events
	Line  Line   // for log events; Line.Seq numbers it within the job's log
}

// ErrLagged ends a subscription whose reader fell too far behind: it can
// subscribe again from the last line it got (Subscribe's after).
var ErrLagged = errors.New("subscriber fell behind")

// maxQueued bounds the events waiting for a slow subscriber.
const maxQueued = 10000

// hub fans what this process records or learns out to its subscribers.
// Each job has one publisher in a process: its Handle where it runs, the
// watcher elsewhere; so a subscriber gets a job's events in order.
type hub struct {
	mu   sync.Mutex
	subs map[int64]map[*Subscription]struct{} // by job ID; 0: every job
	// seq is the last line of each followed job published here, and
	// allSince when the subscriptions to every job began: the watcher
	// fetches what is newer.
	seq      map[int64]int64
	allSince time.Time
}

func newHub() *hub {
	return &hub{subs: map[int64]map[*Subscription]struct{}{}, seq: map[int64]int64{}}
}

func (h *hub) add(s *Subscription, baseline int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s.id] == nil {
		h.subs[s.id] = map[*Subscription]struct{}{}
		if s.id == 0 {
			h.allSince = time.Now()
		}
	}
	h.subs[s.id][s] = struct{}{}
	if _, ok := h.seq[s.id]; s.id != 0 && !ok {
		h.seq[s.id] = baseline
	}
}

func (h *hub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[s.id], s)
	if len(h.subs[s.id]) > 0 {
		return
	}
	delete(h.subs, s.id)
	// Only followed jobs are tracked.
	for id := range h.seq {
		if len(h.subs[id]) == 0 && len(h.subs[0]) == 0 {
			delete(h.seq, id)
		}
	}
}

// interested reports whether anybody follows job id.
func (h *hub) interested(id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[id]) > 0 || len(h.subs[0]) > 0
}

// followed lists the jobs followed one by one, and whether every job is.
func (h *hub) followed() ([]int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []int64
	for id := range h.subs {
		if id != 0 {
			ids = append(ids, id)
		}
	}
	return ids, len(h.subs[0]) > 0
}

// lastSeq is the last line of job id published here; for a job not yet
// tracked it starts from the baseline.
func (h *hub) lastSeq(id int64, baseline func() int64) int64 {
	h.mu.Lock()
	n, ok := h.seq[id]
	h.mu.Unlock()
	if ok {
		return n
	}
	n = baseline() // may ask the hub: not under its lock
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.seq[id]; ok {
		return cur
	}
	h.seq[id] = n
	return n
}

// since is when the subscriptions to every job began (zero if none).
func (h *hub) since() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs[0]) == 0 {
		return time.Time{}
	}
	return h.allSince
}

func (h *hub) publishState(t Record, typ string) {
	h.publish(t.ID, Event{Type: typ, JobID: t.ID, Job: t})
	if t.Status.Done() {
		h.mu.Lock()
		delete(h.seq, t.ID)
		h.mu.Unlock()
	}
}

func (h *hub) publishLines(id int64, lines []Line) {
	if len(lines) == 0 {
		return
	}
	h.mu.Lock()
	if _, ok := h.seq[id]; ok || len(h.subs[id]) > 0 || len(h.subs[0]) > 0 {
		h.seq[id] = max(h.seq[id], lines[len(lines)-1].Seq)
	}
	h.mu.Unlock()
	for _, l := range lines {
		h.publish(id, Event{Type: EventLog, JobID: id, Line: l})
	}
}

func (h *hub) publish(id int64, ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[id] {
		s.push(ev)
	}
	if id != 0 {
		for s := range h.subs[0] {
			s.push(ev)
		}
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	var all []*Subscription
	for _, set := range h.subs {
		for s := range set {
			all = append(all, s)
		}
	}
	h.mu.Unlock()
	for _, s := range all {
		s.Close()
	}
}

// Subscription delivers a job's events (or every job's) on C, in order,
// until the job finishes (its final status event is the last), ctx ends,
// Close, or the reader falls behind (Err then returns ErrLagged).
type Subscription struct {
	C <-chan Event

	m     *Manager
	id    int64 // 0: every job
	c     chan Event
	after int64 // the line the subscriber has already

	rctx    context.Context // for the pump's reads; ends with the subscription
	rcancel context.CancelFunc

	mu     sync.Mutex
	queue  []Event
	err    error
	wake   chan struct{}
	done   chan struct{}
	closed bool
}

// Subscribe follows job id, or every job when id is 0. Following one
// job, C first carries its current state (a status event), then its log
// from the line after `after` (0: the whole log; an SSE client that
// reconnects passes the last Seq it got), then every change as it is
// recorded, up to its final status. Following every job, C carries each
// status change and progress sample, and the log lines recorded after the
// subscription began; jobs that were already running contribute their
// lines from when this process first saw them change.
func (m *Manager) Subscribe(ctx context.Context, id, after int64) (*Subscription, error) {
	var baseline int64
	if id != 0 {
		j, err := m.cat.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		baseline = j.LogLines
	}
	c := make(chan Event)
	s := &Subscription{C: c, m: m, id: id, c: c, after: after, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.rctx, s.rcancel = context.WithCancel(context.Background())
	m.hub.add(s, baseline)
	context.AfterFunc(ctx, s.Close)
	m.kick()
	go s.pump()
	return s, nil
}

// Err is why C was closed: nil after the job finished, the context ended
// or Close; ErrLagged when the reader fell behind.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription; C is closed soon after.
func (s *Subscription) Close() { s.end(nil) }

func (s *Subscription) end(err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.err = true, err
	close(s.done)
	s.mu.Unlock()
	s.rcancel()
	go func() {
		s.m.hub.remove(s) // not under the hub's lock, which push may hold
		s.m.kick()        // the watcher may stop listening for lines
	}()
}

// push queues an event; it never blocks the publisher.
func (s *Subscription) push(ev Event) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if len(s.queue) >= maxQueued {
		s.mu.Unlock()
		s.end(ErrLagged)
		return
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

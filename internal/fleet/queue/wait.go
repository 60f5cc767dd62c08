package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivertype"
)

// recheck is how often Wait reads a job's row without being woken: only a
// safety net for a notice lost with a dropped connection (the listener
// wakes every waiter when it reconnects anyway) or a job River ended
// itself (a panic).
const recheck = 5 * time.Second

// Wait waits for hand-off id to end and returns its outcome. It is woken
// by the NOTIFY of the transaction that completed the job, so it returns
// milliseconds after the worker's commit without polling, with the
// outcome the notice carries under the job's end key (read with the
// row, the first time) or else read from the row.
func (c *Client) Wait(ctx context.Context, id int64) (*Outcome, error) {
	notices, done := c.waiter.watch(id)
	defer done()
	if err := c.waiter.listening(ctx); err != nil {
		return nil, err
	}
	out, key, err := c.ended(ctx, id)
	for err == nil && out == nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case n := <-notices:
			if out := n.outcome(key); out != nil {
				return out, nil
			}
		case <-time.After(recheck):
		}
		out, _, err = c.ended(ctx, id)
	}
	return out, err
}

// WaitSubmitted is Wait for a hand-off this client submitted: when its
// listener was connected before the insert and still is (the same
// connection), a notice of the job's end cannot have been missed, so the
// job's row is read only once it is announced without an outcome under
// the key this client drew (or at the recheck), not also first. Per unit,
// that is two statements and two round trips less.
func (c *Client) WaitSubmitted(ctx context.Context, s Submitted) (*Outcome, error) {
	if s.heard == 0 || s.Duplicate { // a replayed grant's job may have ended long before
		return c.Wait(ctx, s.ID)
	}
	notices, done := c.waiter.watch(s.ID)
	defer done()
	if !c.waiter.still(s.heard) {
		return c.Wait(ctx, s.ID)
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case n := <-notices:
			if out := n.outcome(s.key); out != nil {
				return out, nil
			}
		case <-time.After(recheck):
		}
		out, _, err := c.ended(ctx, s.ID)
		if err != nil || out != nil {
			return out, err
		}
	}
}

// endQuery reads what outcomeOf needs of a hand-off's row: its state,
// whether it ended, its outcome and its last error; and the job's end key
// (Args.EndKey), under which Wait then believes its end notice. River's
// JobGet reads and decodes the whole row (the unit's arguments, every
// attempt's error), and the outcome then from the whole metadata: read
// once per VM by the leader, that was most of its CPU in waiting for a
// unit.
const endQuery = `SELECT state::text, finalized_at IS NOT NULL, metadata->'output',
	coalesce(errors[cardinality(errors)]->>'error', ''), coalesce(args->>'end_key', '') FROM ` + Schema + `.river_job WHERE id = $1`

// ended is hand-off id's outcome once it ended (nil before), and its end
// key.
func (c *Client) ended(ctx context.Context, id int64) (*Outcome, string, error) {
	var (
		state   string
		done    bool
		output  []byte
		lastErr string
		key     string
	)
	err := c.pool.QueryRow(ctx, endQuery, id).Scan(&state, &done, &output, &lastErr, &key)
	if errors.Is(err, pgx.ErrNoRows) {
		err = rivertype.ErrNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("fleet: hand-off %d: %w", id, err)
	}
	if c.endRead != nil {
		c.endRead(id, done)
	}
	if !done {
		return nil, key, nil
	}
	out, err := outcomeOf(id, rivertype.JobState(state), output, lastErr)
	return out, key, err
}

// outcomeOf reads a finished job's outcome: what its worker recorded
// (output), or why River ended it without one (its state and last
// error).
func outcomeOf(id int64, state rivertype.JobState, output []byte, lastErr string) (*Outcome, error) {
	if len(output) > 0 && string(output) != "null" {
		var o Outcome
		if err := json.Unmarshal(output, &o); err != nil {
			return nil, fmt.Errorf("fleet: hand-off %d's outcome: %w", id, err)
		}
		return &o, nil
	}
	o := &Outcome{ErrorClass: "internal", Error: fmt.Sprintf("the hand-off ended %s without an outcome", state)}
	if state == rivertype.JobStateCancelled {
		o.ErrorClass, o.Error = "cancelled", "cancelled before it started"
	}
	if lastErr != "" {
		o.Error = lastErr
	}
	return o, nil
}

// waiter holds one LISTEN connection for all of a client's Waits, and
// hands each notice of a job's end to that job's waiters.
type waiter struct {
	pool    *pgxpool.Pool
	mu      sync.Mutex
	waiting map[int64]map[chan endNotice]struct{}
	ready   chan struct{} // closed once LISTEN holds
	stop    context.CancelFunc
	started bool
	err     error
	// conn numbers the listener's connection while LISTEN holds (0: it
	// does not); unheard are the last unheardKept IDs it was told of on
	// that connection, in order (keepUnheard).
	conn, conns uint64
	unheard     map[int64]struct{}
	unheardIDs  []int64
	// watched, if set (by tests, before any Wait), is told of each
	// waiter that watches a job, with w.mu held: it must not block.
	watched func(id int64)
}

// unheardKept bounds the notices kept for a Wait to come: far more than
// the hand-offs a server has in flight.
const unheardKept = 4096

func newWaiter(pool *pgxpool.Pool) *waiter {
	return &waiter{pool: pool, waiting: map[int64]map[chan endNotice]struct{}{}, ready: make(chan struct{}), unheard: map[int64]struct{}{}}
}

// heard is the listener's connection now (0: none), started if it was
// not: a submitter takes it before its insert, and WaitSubmitted trusts
// the notices only if it is still the same (still).
func (w *waiter) heard() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startLocked()
	return w.conn
}

// still reports that the listener's connection is conn (not 0).
func (w *waiter) still(conn uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return conn != 0 && w.conn == conn
}

func (w *waiter) startLocked() {
	if !w.started {
		w.started = true
		ctx, cancel := context.WithCancel(context.Background())
		w.stop = cancel
		go w.listen(ctx)
	}
}

// watch registers a waiter of id; done unregisters it. Each notice of id
// comes on notices, the first one that finds it empty: a later one (a
// copy, a forgery repeating a key seen) is dropped while it holds one. A
// notice of id heard before (unheard) wakes it at once (and any later
// waiter too), as an end alone: only a waiter that was watching is handed
// the outcome.
func (w *waiter) watch(id int64) (notices <-chan endNotice, done func()) {
	ch := make(chan endNotice, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startLocked()
	if _, ok := w.unheard[id]; ok {
		ch <- endNotice{}
	}
	if w.waiting[id] == nil {
		w.waiting[id] = map[chan endNotice]struct{}{}
	}
	w.waiting[id][ch] = struct{}{}
	if w.watched != nil {
		w.watched(id)
	}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.waiting[id], ch)
		if len(w.waiting[id]) == 0 {
			delete(w.waiting, id)
		}
	}
}

// listening returns once notices reach the waiters: a job that completes
// after that wakes them.
func (w *waiter) listening(ctx context.Context) error {
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.err != nil {
			return fmt.Errorf("fleet: listen for hand-offs' ends: %w", w.err)
		}
		return ctx.Err()
	}
}

func (w *waiter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
}

// listen keeps a connection LISTENing, reconnecting after a failure
// (waking every waiter then: a notice may have been lost meanwhile).
func (w *waiter) listen(ctx context.Context) {
	var once sync.Once
	for backoff := 100 * time.Millisecond; ctx.Err() == nil; backoff = min(2*backoff, 5*time.Second) {
		err := w.listenOnce(ctx, func() { once.Do(func() { close(w.ready) }) })
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		w.wakeAll()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

func (w *waiter) listenOnce(ctx context.Context, ready func()) error {
	conn, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, `LISTEN `+doneChannel); err != nil {
		return err
	}
	w.mu.Lock()
	w.conns++
	w.conn = w.conns
	clear(w.unheard)
	w.unheardIDs = w.unheardIDs[:0]
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.conn = 0
		w.mu.Unlock()
	}()
	ready()
	w.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if id, notice, ok := parseEndNotice(n.Payload); ok {
			w.wake(id, notice)
		}
	}
}

// wake hands notice n of id to its waiters.
func (w *waiter) wake(id int64, n endNotice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keepUnheard(id)
	for ch := range w.waiting[id] {
		select {
		case ch <- n:
		default:
		}
	}
}

func (w *waiter) wakeAll() {
	w.mu.Lock()
	ids := make([]int64, 0, len(w.waiting))
	for id := range w.waiting {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	for _, id := range ids {
		w.wake(id, endNotice{})
	}
}

// keepUnheard keeps the notice of id for a Wait to come (a job that ended
// before its submitter's Wait began), forgetting the oldest past
// unheardKept. Called with w.mu held.
func (w *waiter) keepUnheard(id int64) {
	if _, ok := w.unheard[id]; ok {
		return
	}
	if len(w.unheardIDs) >= unheardKept {
		delete(w.unheard, w.unheardIDs[0])
		w.unheardIDs = w.unheardIDs[1:]
	}
	w.unheard[id] = struct{}{}
	w.unheardIDs = append(w.unheardIDs, id)
}

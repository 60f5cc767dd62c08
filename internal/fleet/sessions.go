package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
)

// A unit a worker runs writes through a repository session of its own
// (RunVMUnit). When the worker is killed, the packs it committed are
// unindexed until its lease expires (repo.LeaseTTL, 10 minutes), so a
// retry elsewhere would store all of them again. The leader knows sooner:
// it declares the worker lost, or the unit comes back fenced. It then ends
// the sessions of that registration in every repository its units in
// flight write to (repo.EndSessionsOf), before the retries are admitted,
// so that they deduplicate against what the lost attempts stored.

// SessionOwner names a worker's registration as the owner of the write
// sessions its units open (repo.LeaseInfo.Owner). The epoch keeps the
// end of a lost registration's sessions off those of the worker's next
// one.
func SessionOwner(worker string, epoch int64) string {
	return fmt.Sprintf("worker %s epoch %d", worker, epoch)
}

// endTimeout bounds the end of one registration's sessions in one
// repository: the retries wait for it, and without it they are still
// correct, only slower (they store the chunks again).
const endTimeout = time.Minute

// Sessions is the leader's record of the repositories the units it handed
// to each worker registration write to, and what ends their sessions. The
// nil *Sessions records nothing and ends nothing.
type Sessions struct {
	// Open opens a repository by the name a policy gives it ("": the
	// default), as service.OpenNamed does.
	Open func(ctx context.Context, repository string) (*repo.Repository, error)
	Log  *slog.Logger

	mu    sync.Mutex
	units map[sessionsKey]int // units in flight
}

type sessionsKey struct {
	worker     string
	epoch      int64
	repository string
}

// hold records a unit in flight on a worker's registration, writing to
// repository, until the returned function is called.
func (s *Sessions) hold(worker string, epoch int64, repository string) (release func()) {
	if s == nil {
		return func() {}
	}
	k := sessionsKey{worker, epoch, repository}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.units == nil {
		s.units = map[sessionsKey]int{}
	}
	s.units[k]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.units[k]--; s.units[k] <= 0 {
			delete(s.units, k)
		}
	}
}

// EndWorker ends the sessions of a lost worker's registration (and of any
// earlier one still with units in flight) in each repository its units in
// flight write to. It returns once they are ended (or failed to be, which
// it logs): the caller re-admits the units after it.
func (s *Sessions) EndWorker(ctx context.Context, w Worker) {
	if s == nil {
		return
	}
	s.mu.Lock()
	var keys []sessionsKey
	for k := range s.units {
		if k.worker == w.Name && k.epoch <= w.Epoch {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	// At once in every repository: the retries wait for the slowest.
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() { s.end(ctx, k) })
	}
	wg.Wait()
}

// endUnit ends the sessions of the registration a unit came back fenced
// from, in the unit's repository.
func (s *Sessions) endUnit(ctx context.Context, worker string, epoch int64, repository string) {
	if s != nil {
		s.end(ctx, sessionsKey{worker, epoch, repository})
	}
}

func (s *Sessions) end(ctx context.Context, k sessionsKey) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	start := time.Now()
	owner := SessionOwner(k.worker, k.epoch)
	n, chunks, err := s.endIn(ctx, k.repository, owner)
	log := s.log().With("worker", k.worker, "epoch", k.epoch, "repository", k.repository)
	if err != nil {
		log.Warn("cannot end a lost worker's write sessions: its retries store its chunks again", "err", err)
		return
	}
	if n > 0 {
		log.Info("a lost worker's write sessions ended: their packs are adopted", "sessions", n, "chunks", chunks,
			"took", time.Since(start).Round(time.Millisecond))
	}
}

func (s *Sessions) endIn(ctx context.Context, repository, owner string) (sessions, chunks int, err error) {
	r, err := s.Open(ctx, repository)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = r.Close() }()
	return r.EndSessionsOf(ctx, owner)
}

func (s *Sessions) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

package service

import (
	"context"
	"log/slog"

	"golang.org/x/sync/semaphore"
)

// BootSlot waits for one of the limits.boot-verifications slots that
// every boot verification of this process shares, manual or scheduled:
// each boots a whole VM, and verification must never crowd out backups.
// The limit is read when the first verification starts; a changed limit
// takes effect when the server restarts.
func (s *Service) BootSlot(ctx context.Context, t Job) (release func(), err error) {
	s.bootMu.Lock()
	if s.bootSem == nil {
		n := 1
		if cfg, err := s.EngineConfig(ctx); err == nil {
			n = cfg.Limits.WithDefaults().BootVerifications
		}
		s.bootSem, s.bootCap = semaphore.NewWeighted(int64(n)), n
	}
	sem, n := s.bootSem, s.bootCap
	s.bootMu.Unlock()
	if !sem.TryAcquire(1) {
		t.Log(slog.LevelInfo, "waiting for a boot verification slot", "limit", n)
		if err := sem.Acquire(ctx, 1); err != nil {
			return nil, err
		}
	}
	return func() { sem.Release(1) }, nil
}

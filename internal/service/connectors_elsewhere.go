package service

import (
	"context"
	"errors"

	hvall "github.com/coffer-backup/coffer/internal/hypervisor/all"
	"github.com/coffer-backup/coffer/internal/policy"
)

// RefuseElsewhere refuses the named connections of cfg that this process
// would open itself although their hypervisor's disks can only be read
// on another host (hvall.Kind.Elsewhere: a libvirt URI naming another
// host), saying where to run a worker. A connection that a worker
// reaches is the workers' (WorkerConnections) and is not refused: this
// process never opens it. Policy check, a policy's run and a backup of
// one VM call it before anything is snapshotted, so that such a backup
// is refused rather than failing at its first read.
func (s *Service) RefuseElsewhere(ctx context.Context, cfg *policy.Config, names []string) error {
	var refused []error
	seen := map[string]bool{}
	for _, name := range names {
		cc, ok := cfg.Connection(name)
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		kind, ok := hvall.Lookup(cc.Kind)
		if !ok || kind.Elsewhere == nil {
			continue
		}
		why := kind.Elsewhere(hvall.Config{Connection: cc})
		if why == nil {
			continue
		}
		if _, theirs, err := s.standIn(ctx, cfg, name); err != nil {
			return err
		} else if theirs {
			continue
		}
		refused = append(refused, why)
	}
	if err := errors.Join(refused...); err != nil {
		return Invalidf("%v", err)
	}
	return nil
}

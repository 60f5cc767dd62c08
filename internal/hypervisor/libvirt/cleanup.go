package libvirt

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// CleanupLeftovers implements hypervisor.Connector: it replays the
// journals of sessions whose coffer process is gone. It thaws and resumes
// what they froze or paused, aborts their backup job, and deletes the
// checkpoint each one journalled unless its point was committed; it
// touches no other job and no other checkpoint.
func (c *Connector) CleanupLeftovers(ctx context.Context) ([]hypervisor.Leftover, error) {
	js, err := loadJournals(c.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Leftover
	var errs []error
	for _, j := range js {
		if j.PID == os.Getpid() || statefile.ProcessAlive(j.PID) {
			continue // a live session's: its Close handles it
		}
		if j.URI != c.cfg.URI {
			continue // another connection's journal in a shared state directory
		}
		left, err := c.cleanup(ctx, j)
		out = append(out, left...)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup of %s: %w", j.DomainName, errors.Join(err, j.save())))
			continue
		}
		if err := j.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func (c *Connector) cleanup(ctx context.Context, j *journal) ([]hypervisor.Leftover, error) {
	ref := hypervisor.VMRef{ID: j.DomainUUID, Name: j.DomainName}
	unlock := c.lockDomain(j.DomainUUID)
	defer unlock()
	lv, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	if j.Original != nil {
		action := "replacement files removed; the domain's disks are as they were"
		if j.Original.Renaming {
			action = "the restore's last renames finished; the domain's disks hold the backup point"
		}
		dom, err := c.lookup(ctx, lv, hypervisor.VMRef{ID: j.DomainUUID})
		if err != nil {
			return nil, err
		}
		if err := c.finishOriginal(ctx, lv, dom, j.Original); err != nil {
			return nil, err
		}
		return []hypervisor.Leftover{{VM: ref, Kind: "restore-onto-original", Name: j.DomainName, Action: action}}, nil
	}
	if j.Instant != nil {
		return c.cleanupInstant(ctx, lv, j)
	}
	if j.Restore != nil {
		if err := c.removeRestored(ctx, lv, &j.journalState); err != nil {
			return nil, err
		}
		return []hypervisor.Leftover{{VM: ref, Kind: "restored-vm", Name: j.DomainName, Action: "removed (its restore was interrupted)"}}, nil
	}
	dom, err := c.lookup(ctx, lv, hypervisor.VMRef{ID: j.DomainUUID})
	if errors.Is(err, hypervisor.ErrNotFound) {
		for _, f := range append(j.Scratch, j.Socket) {
			_ = os.Remove(f) // best effort: the domain is gone
		}
		return []hypervisor.Leftover{{VM: ref, Kind: "journal", Name: j.SessionID, Action: "domain gone; journal dropped"}}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Leftover
	if j.Frozen {
		out = append(out, hypervisor.Leftover{VM: ref, Kind: "guest-freeze", Name: "fsfreeze", Action: "thawed"})
	}
	if j.Suspended {
		out = append(out, hypervisor.Leftover{VM: ref, Kind: "vm-state", Name: "paused", Action: "resumed"})
	}
	if j.Job {
		out = append(out, hypervisor.Leftover{VM: ref, Kind: "job", Name: "backup " + j.Socket, Action: "aborted"})
	}
	if err := c.endJob(ctx, lv, dom, &j.journalState); err != nil {
		return out, err
	}
	if j.Checkpoint != "" && !j.Keep {
		cps, err := c.checkpoints(ctx, lv, dom)
		if err != nil {
			return out, err
		}
		if _, exists := cps[j.Checkpoint]; exists {
			if err := c.deleteCheckpoint(ctx, lv, dom, j.Checkpoint); err != nil {
				return out, err
			}
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "checkpoint", Name: j.Checkpoint, Action: "removed"})
		}
		if j.Offline != nil { // bitmaps added before their metadata was defined
			if err := c.removeOfflineBitmaps(ctx, lv, dom, j.Offline.Images, j.Checkpoint); err != nil {
				return out, err
			}
		}
	}
	return append(out, hypervisor.Leftover{VM: ref, Kind: "journal", Name: j.SessionID, Action: "removed"}), nil
}

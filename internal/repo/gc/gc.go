// Package gc removes data no backup point needs any more, with memory
// bounded by a budget (external sorting) instead of by repository size, and
// without ever blocking backups.
//
// # Algorithm (two phases)
//
// Plan (phase B): under the maintenance lease, record the live sessions L,
// mark every chunk referenced by any manifest (external sort of the chunk
// IDs of all disk maps), merge-join it with the index to find each pack's
// live and dead bytes, copy the live chunks of mostly-dead packs into new
// packs (repack), and write one compacted index segment that supersedes the
// old ones and lists neither dead chunks nor chunks of doomed packs. New
// sessions now can no longer see doomed chunks. The doomed packs, the old
// segments and orphan disk maps are written into a plan object.
//
// Execute (phase A): once every session in L has ended (they may have
// deduplicated against doomed chunks before the compaction), re-check the
// backup points committed since the mark; any chunk they use that is no
// longer indexed is rescued (re-indexed from the old segments, its pack
// kept). Then the plan's objects are deleted.
//
// On a quiet repository both phases run in one invocation. When backups are
// running, deletion waits for the next run (the server schedules gc).
//
// # Memory
//
// Nothing that grows with the repository is held in memory: the
// referenced chunk IDs, the index entries (sorted by pack to decide each
// pack's fate, and back by chunk ID to write the compacted segment), the
// packs and disk maps listed in the store, the packs kept by a rescue and
// the plan's lists all go through external sorts (internal/extsort) that
// buffer at most Options.MemoryBudget bytes and spill sorted runs to
// TempDir, and every join is a merge of sorted streams. The plan object
// names part objects (gc/part-...) that list its packs and disk maps, read
// back one at a time. What stays in memory is the budget (the sort
// buffers live outside the Go heap, so they do not raise the collector's
// target either), one old pack being repacked and one new pack being
// written (at most 8192 blobs), one index or disk-map block being read,
// the manifests of the backup points (their IDs and disk-map names), and
// what the index format itself keeps of every loaded or written segment:
// its block table and bloom filter (about 1.3 bytes per chunk).
// bench/gcmem measures it (docs/benchmarks.md).
package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

// DefaultRepackThreshold is the dead fraction of a pack that gc repacks
// by default: below it, the dead bytes stay in the store (the planner's
// capacity forecast counts them as slack).
const DefaultRepackThreshold = 0.3

// Options tune a collection.
type Options struct {
	DryRun bool
	// MemoryBudget bounds what the external sorts buffer (default 64 MiB).
	MemoryBudget int
	TempDir      string
	// RepackThreshold is the dead fraction above which a pack's live
	// chunks are copied out so the pack can be deleted (default
	// DefaultRepackThreshold).
	RepackThreshold float64
	// MaxRepackBytes caps the data rewritten in one run (default 4 GiB).
	MaxRepackBytes int64
	// Wait makes gc wait (up to this long) for live sessions to end instead
	// of deferring deletion to the next run.
	Wait time.Duration
}

func (o *Options) defaults() {
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = 64 << 20
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.RepackThreshold <= 0 {
		o.RepackThreshold = DefaultRepackThreshold
	}
	if o.MaxRepackBytes <= 0 {
		o.MaxRepackBytes = 4 << 30
	}
}

// Report says what a collection did.
type Report struct {
	Snapshots        int      `json:"snapshots"`
	ChunksReferenced int64    `json:"chunks_referenced"`
	ChunksIndexed    int64    `json:"chunks_indexed"`
	PacksDeleted     int      `json:"packs_deleted"`
	PacksRepacked    int      `json:"packs_repacked"`
	PacksPlanned     int      `json:"packs_planned"`
	BytesFreed       int64    `json:"bytes_freed"`
	BytesRepacked    int64    `json:"bytes_repacked"`
	SegmentsMerged   int      `json:"segments_merged"`
	MapsDeleted      int      `json:"maps_deleted"`
	ChunksRescued    int      `json:"chunks_rescued"`
	Deferred         bool     `json:"deferred"`
	WaitingFor       []string `json:"waiting_for,omitempty"`
	Retained         int      `json:"objects_retained"`  // under retention lock, kept
	Leftovers        int      `json:"leftovers_removed"` // temp files / incomplete uploads of dead writers
	DryRun           bool     `json:"dry_run"`
}

// leftoverAge is the age after which an unfinished write is certainly dead.
const leftoverAge = 24 * time.Hour

// Run collects garbage.
func Run(ctx context.Context, r *repo.Repository, o Options) (*Report, error) {
	o.defaults()
	rep := &Report{DryRun: o.DryRun}
	lease, err := r.AcquireLease(ctx, "gc", "", "garbage collection", true)
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	if !o.DryRun {
		if _, err := r.RecoverDeadSessions(ctx); err != nil {
			return nil, fmt.Errorf("recover interrupted sessions: %w", err)
		}
		// Finish an earlier plan first: its deletions may now be safe.
		if err := execute(ctx, r, o, rep, lease.Info().Name); err != nil {
			return rep, err
		}
		if rep.Deferred {
			return rep, nil // do not stack a second plan on a pending one
		}
		if j, ok := r.Store().(store.Janitor); ok {
			// A day is far longer than any single object write.
			n, err := j.RemoveLeftovers(ctx, time.Now().Add(-leftoverAge))
			if err != nil {
				r.Logger().Warn("could not remove leftovers of interrupted writes", "err", err)
			}
			rep.Leftovers = n
		}
	}
	if err := plan(ctx, r, o, rep, lease.Info().Name); err != nil {
		return rep, err
	}
	if o.DryRun || rep.PacksPlanned == 0 && rep.SegmentsMerged == 0 && rep.MapsDeleted == 0 {
		return rep, nil
	}
	if err := execute(ctx, r, o, rep, lease.Info().Name); err != nil {
		return rep, err
	}
	if rep.Deferred && o.Wait > 0 {
		deadline := time.Now().Add(o.Wait)
		for rep.Deferred && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return rep, ctx.Err()
			case <-time.After(2 * time.Second): // polling leases held by other processes
			}
			rep.Deferred, rep.WaitingFor = false, nil
			if err := execute(ctx, r, o, rep, lease.Info().Name); err != nil {
				return rep, err
			}
		}
	}
	if err := lease.Err(); err != nil {
		return rep, err
	}
	return rep, nil
}

// errAbort wraps reasons to stop before deleting anything.
var errAbort = errors.New("garbage collection aborted, nothing was deleted")

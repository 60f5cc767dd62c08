package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Request describes one backup point.
type Request struct {
	Source       repo.Source
	Time         time.Time // the snapshot instant; default: when Run starts
	Tags         map[string]string
	Mode         string // full, incremental, differential
	SnapshotMode string // as requested
	// SnapshotModeAchieved is what the source really provided: the
	// connector's report for a VM, as-is for a disk image.
	SnapshotModeAchieved string
	// Hooks is how the application hooks around the snapshot went
	// (HooksOK, HooksPreFailed, HooksPostFailed; "" none ran).
	Hooks       string
	Parent      *repo.Point // previous point of the same source, if any
	BaseFull    string
	VMConfig    json.RawMessage
	Disks       []Disk
	Warnings    []string
	JobID       int64
	RetainUntil time.Time
	Protected   bool
	// BeforeCommit, if set, runs after all disks were read and before the
	// point is committed; an error aborts the backup (e.g. the source
	// changed under it).
	BeforeCommit func() error
}

// Run backs up every disk of a request and commits the backup point. On
// failure nothing becomes visible, but chunks already packed stay in the
// repository and are reused by the next attempt.
func Run(ctx context.Context, w *repo.Writer, req Request, o Options) (*repo.Point, error) {
	start := time.Now()
	if req.Time.IsZero() {
		req.Time = start
	}
	host, _ := os.Hostname()
	snap := &repo.Point{
		Time: req.Time.UTC(), Host: host, Source: req.Source, Tags: req.Tags, Mode: req.Mode,
		SnapshotMode: req.SnapshotMode, SnapshotModeAchieved: req.SnapshotModeAchieved, Hooks: req.Hooks, BaseFull: req.BaseFull, VMConfig: req.VMConfig,
		Warnings: req.Warnings, JobID: req.JobID, RetainUntil: req.RetainUntil, Protected: req.Protected,
	}
	if req.Parent != nil {
		snap.Parent = req.Parent.ID.String()
	}
	if o.Progress != nil {
		for _, d := range req.Disks {
			o.Progress.BytesTotal.Add(d.Size)
		}
	}
	cs := w.Repository().Config().ChunkSize
	var deps []*repo.Pending
	for _, d := range req.Disks {
		st := w.NewRetainedStream(req.RetainUntil)
		res, mw, err := backupToMap(ctx, w, st, d, o, req.RetainUntil)
		if err == nil && res.differ > 0 {
			mw.Abort()
			// Change tracking lied about this disk: read all of it now
			// (unchanged spans dedup against what is stored), and drop
			// its token so the next backup does not trust it either.
			warn := distrustWarning(res.checked, res.differ)
			d.Warning = joinWarnings(d.Warning, warn)
			snap.Warnings = append(snap.Warnings, d.Name+": "+warn)
			d.ChangedValid, d.ChangeToken = false, ""
			if o.Progress != nil {
				o.Progress.BytesTotal.Add(d.Size)
			}
			first := res
			if res, mw, err = backupToMap(ctx, w, st, d, o, req.RetainUntil); err == nil {
				res.bytesRead += first.bytesRead
				res.bytesNew += first.bytesNew
				res.sealed += first.sealed
				res.chunksNew += first.chunksNew
				res.checked, res.differ = first.checked, first.differ
				res.deps = append(res.deps, first.deps...)
			}
		}
		// Commit what was packed even on failure, so a retry reuses it.
		ferr := st.Flush(context.WithoutCancel(ctx))
		if err != nil {
			return nil, fmt.Errorf("disk %s: %w", d.Name, err)
		}
		if ferr != nil {
			mw.Abort()
			return nil, fmt.Errorf("disk %s: %w", d.Name, ferr)
		}
		name, err := mw.Commit()
		if err != nil {
			return nil, fmt.Errorf("disk %s: %w", d.Name, err)
		}
		if err := w.RetainMap(ctx, name, req.RetainUntil); err != nil {
			return nil, fmt.Errorf("disk %s: %w", d.Name, err)
		}
		deps = append(deps, res.deps...)
		kind := d.Kind
		if kind == "" {
			kind = "disk"
		}
		snap.Disks = append(snap.Disks, repo.Disk{
			Key: d.Key, Name: d.Name, Kind: kind, Size: d.Size, ChunkSize: cs, Map: name, Format: d.Format,
			Path: d.Path, ChangeToken: d.ChangeToken, Mode: d.Mode, Warning: d.Warning,
			BytesRead: res.bytesRead, BytesZero: res.bytesZero, BytesNew: res.bytesNew,
			ChangeCheckSpans: res.checked, ChangeCheckDiffer: res.differ,
		})
		snap.BytesRead += res.bytesRead
		snap.BytesNew += res.bytesNew
		snap.BytesStored += res.sealed
		snap.ChunksNew += res.chunksNew
		snap.ChunksTotal += res.spans
	}
	snap.Duration = time.Since(start).Seconds()
	if req.BeforeCommit != nil {
		if err := req.BeforeCommit(); err != nil {
			return nil, err
		}
	}
	if err := w.Commit(ctx, snap, deps); err != nil {
		return nil, err
	}
	return snap, nil
}

// backupToMap backs up one disk into a new disk map, which the caller
// commits (after the disk's packs) or aborts.
func backupToMap(ctx context.Context, w *repo.Writer, st *repo.Stream, d Disk, o Options, retain time.Time) (*diskResult, *repo.DiskMapWriter, error) {
	mw, err := w.CreateDiskMap(ctx, d.Size, w.Repository().Config().ChunkSize, retain)
	if err != nil {
		return nil, nil, err
	}
	res, err := backupDisk(ctx, w, st, d, o, mw)
	if err != nil {
		mw.Abort()
		return nil, nil, err
	}
	return res, mw, nil
}

// Latest returns the newest snapshot of a source, or nil.
//
// The sources are compared field by field, not by Key: a job plans each
// of its VMs against every point of the repository, and building two keys
// per point took three quarters of that.
func Latest(snaps []*repo.Point, src repo.Source, pred func(*repo.Point) bool) *repo.Point {
	var best *repo.Point
	for _, s := range snaps {
		if s.Source != src || (pred != nil && !pred(s)) {
			continue
		}
		if best == nil || s.Time.After(best.Time) {
			best = s
		}
	}
	return best
}

// PreviousIDs loads the chunk IDs of disk key in snapshot s when it has the
// same geometry (PreviousMap), whole: for tests and tools that want them
// all at once; a backup reads them as it goes.
func PreviousIDs(ctx context.Context, r *repo.Repository, s *repo.Point, key string, size int64) ([]id.ID, error) {
	m, err := openPreviousMap(ctx, r, s, key, size)
	if m == nil || err != nil {
		return nil, err
	}
	return m.All(ctx)
}

func joinWarnings(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

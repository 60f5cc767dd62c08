package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// VMRequest describes the backup of one VM through a connector.
type VMRequest struct {
	Connection   string // connection name in the configuration
	VM           hypervisor.VMRef
	Mode         string // "full", "incremental" (default) or "differential"
	SnapshotMode hypervisor.SnapshotMode
	Quiesce      hypervisor.QuiescePolicy
	Timeouts     hypervisor.Timeouts
	// Chain names the backup chain (policy and repository) for connectors
	// that track changes per chain; "" is the default chain.
	Chain       string
	Tags        map[string]string
	JobID       int64
	RetainUntil time.Time
	// History is the repository's backup points (to find the parent and
	// the base full); nil means load them.
	History []*repo.Point
	// Hooks run around the snapshot (hooks.go).
	Hooks []Hook
	// Time is the point's time; zero: when the backup starts.
	Time time.Time
	// Owner and OwnerGone go to the snapshot request (hypervisor.
	// SnapshotRequest): who takes the snapshot, and how to tell another
	// owner's leftover from a backup running elsewhere. Unset: a single
	// coffer.
	Owner     string
	OwnerGone func(ctx context.Context, owner string) (bool, error)
}

// CloseTimeout bounds releasing a session after the caller's context ended.
const CloseTimeout = 5 * time.Minute

// BackupVM snapshots a VM, streams its disks into the repository and
// commits the backup point: PlanVM, then the hooks around the snapshot,
// then RunVM. The hypervisor session is always closed: with ok=true only
// after the point is committed, so a failed backup leaves change tracking
// as if it had not run.
func BackupVM(ctx context.Context, w *repo.Writer, conn hypervisor.Connector, req VMRequest, o Options) (*repo.Point, error) {
	history := req.History
	if history == nil {
		var err error
		if history, err = w.Repository().Points(ctx, nil); err != nil {
			return nil, err
		}
	}
	plan := PlanVM(history, repo.Source{Kind: conn.Kind(), Connection: req.Connection, VMID: req.VM.ID, VMName: req.VM.Name}, req.Mode)
	sreq := plan.SnapshotRequest(hypervisor.SnapshotRequest{
		SessionID: fmt.Sprintf("%s-%d", w.Session(), time.Now().UnixNano()%1e9), Chain: req.Chain,
		Mode: req.SnapshotMode, Quiesce: req.Quiesce, Timeouts: req.Timeouts,
		Owner: req.Owner, OwnerGone: req.OwnerGone,
	})
	if req.Time.IsZero() {
		req.Time = time.Now()
	}
	hooks := newHookRun(req.Hooks, conn, req.VM, req.Connection)
	if err := hooks.pre(ctx); err != nil {
		hooks.post(ctx)
		return nil, errors.Join(append([]error{err}, notesErr(hooks.notes))...)
	}
	sess, err := conn.Snapshot(ctx, req.VM, sreq)
	// The application resumes as soon as the instant is taken, before the
	// (long) read; the snapshot holds what pre made consistent.
	hooks.post(ctx)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("snapshot %s: %w", req.VM.Name, err), notesErr(hooks.notes))
	}
	return runVM(ctx, w, plan, sess, req, o, hooks)
}

// RunVM reads the disks of an open snapshot session of the VM into the
// repository as planned (the session's change sets must be the plan's:
// Plan.SnapshotRequest) and commits the point. The session is always
// closed, with ok=true only after the point is committed. It runs no
// hooks (req.Hooks is not read): the caller took the snapshot, as a group
// run does in its batch. The point's time is req.Time, or now.
func RunVM(ctx context.Context, w *repo.Writer, plan Plan, sess hypervisor.Session, req VMRequest, o Options) (*repo.Point, error) {
	if req.Time.IsZero() {
		req.Time = time.Now()
	}
	return runVM(ctx, w, plan, sess, req, o, &hookRun{})
}

// runVM is RunVM after hooks ran around the snapshot.
func runVM(ctx context.Context, w *repo.Writer, plan Plan, sess hypervisor.Session, req VMRequest, o Options, hooks *hookRun) (snap *repo.Point, err error) {
	r := w.Repository()
	committed := false
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CloseTimeout)
		defer cancel()
		tokens, cerr := sess.Close(cctx, committed)
		if cerr != nil {
			if committed {
				// The point is valid; only tracking may not have advanced:
				// the next backup finds the token invalid and reads fully.
				snap.Warnings = append(snap.Warnings, fmt.Sprintf("releasing the hypervisor snapshot failed: %v", cerr))
				_ = r.UpdatePoint(context.WithoutCancel(ctx), snap)
				return
			}
			err = errors.Join(err, fmt.Errorf("release snapshot: %w", cerr))
			return
		}
		if committed && recordTokens(snap, tokens) {
			if uerr := r.UpdatePoint(cctx, snap); uerr != nil {
				err = fmt.Errorf("record change tokens: %w", uerr)
			}
		}
	}()
	opening := time.Now()
	disks, warnings, err := openDisks(ctx, r, sess, plan.Base, plan.Parent)
	if o.Progress != nil {
		o.Progress.SetupNanos.Store(int64(time.Since(opening)))
	}
	defer func() {
		for _, d := range disks {
			if c, ok := d.Reader.(interface{ Close() error }); ok {
				_ = c.Close()
			}
		}
	}()
	if n, ok := sess.(hypervisor.Noter); ok && o.Note != nil {
		for _, line := range n.Notes() {
			o.Note(line)
		}
	}
	if err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(sess.Config())
	overall := plan.Mode
	for _, d := range disks {
		// A memory stream is always a whole copy; the point's mode (what
		// retention and "full every N" policies look at) follows the disks.
		if d.Kind != hypervisor.KindMemory && d.Mode == "full" && plan.Mode != "full" {
			overall = "full" // at least one disk had to be read in full
		}
	}
	transferring := time.Now()
	defer func() {
		if o.Progress != nil {
			o.Progress.TransferNanos.Store(int64(time.Since(transferring)))
		}
	}()
	snap, err = Run(ctx, w, Request{
		Source: plan.Source, Time: req.Time, Tags: req.Tags, Mode: overall, SnapshotMode: string(req.SnapshotMode),
		SnapshotModeAchieved: string(sess.AchievedMode()), // a fallback is weaker than asked
		Hooks:                hooks.outcome(),
		Parent:               plan.Parent, BaseFull: idOf(plan.BaseFull), VMConfig: cfg, Disks: disks,
		Warnings: append(append(hooks.notes, sess.Warnings()...), warnings...), JobID: req.JobID, RetainUntil: req.RetainUntil,
	}, o)
	if err != nil {
		return nil, err
	}
	committed = true
	return snap, nil
}

// notesErr is the hooks' warnings as an error, for a backup that failed
// anyway; nil when there are none.
func notesErr(notes []string) error {
	var errs []error
	for _, n := range notes {
		errs = append(errs, errors.New(n))
	}
	return errors.Join(errs...)
}

func idOf(s *repo.Point) string {
	if s == nil {
		return ""
	}
	return s.ID.String()
}

// openDisks opens every frozen disk and decides how each is read.
func openDisks(ctx context.Context, r *repo.Repository, sess hypervisor.Session, base, parent *repo.Point) ([]Disk, []string, error) {
	var disks []Disk
	var warnings []string
	for _, ds := range sess.Disks() {
		rd, err := sess.OpenDisk(ctx, ds.Key)
		if err != nil {
			return disks, warnings, fmt.Errorf("open disk %s: %w", ds.Name, err)
		}
		d := Disk{Key: ds.Key, Name: ds.Name, Kind: ds.Kind, Format: ds.Format, Path: ds.Path, Reader: rd,
			Size: rd.Size(), ChangeToken: ds.NewToken, Mode: "full", Warning: ds.ChangeWarning}
		disks = append(disks, d)
		last := &disks[len(disks)-1]
		if last.Allocated, err = rd.Allocated(ctx); err != nil {
			return disks, warnings, fmt.Errorf("allocation map of %s: %w", ds.Name, err)
		}
		if ds.ChangeWarning != "" {
			warnings = append(warnings, fmt.Sprintf("disk %s: %s; read in full", ds.Name, ds.ChangeWarning))
		}
		// Unchanged spans may reuse the IDs of the point the change set is
		// relative to; without a change set, the parent's IDs still save
		// storing identical spans again.
		ref := parent
		if ds.Changes != "full" && ds.Changes != "" {
			changed, ok, err := rd.Changed(ctx)
			if err != nil {
				return disks, warnings, fmt.Errorf("changed blocks of %s: %w", ds.Name, err)
			}
			if ok && base != nil {
				last.Changed, last.ChangedValid, last.Mode, ref = changed, true, ds.Changes, base
			}
		}
		if last.Previous, err = PreviousMap(ctx, r, ref, ds.Key, last.Size); err != nil {
			return disks, warnings, err
		}
		if last.ChangedValid && last.Previous == nil {
			// The base has no map of this geometry (disk resized or added):
			// a change set alone cannot reconstruct the disk.
			last.Changed, last.ChangedValid, last.Mode = nil, false, "full"
			warnings = append(warnings, fmt.Sprintf("disk %s: no usable base in the repository; read in full", ds.Name))
		}
	}
	return disks, warnings, nil
}

// recordTokens stores tokens returned by Close into the manifest's disks
// and reports whether anything changed.
func recordTokens(s *repo.Point, tokens map[string]string) bool {
	changed := false
	for i, d := range s.Disks {
		if d.ChangeCheckDiffer > 0 {
			continue // its change tracking lied: the next backup must not trust it
		}
		if t, ok := tokens[d.Key]; ok && t != d.ChangeToken {
			s.Disks[i].ChangeToken = t
			changed = true
		}
	}
	return changed
}

package storagesnap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// Kept storage snapshots (keep-storage-snapshots on a policy) are the
// Zero Downtime Backup / Instant Recovery half of storage integration: a
// run's storage snapshot stays on the datastore after its VMs are read,
// and a restore clones the VM's disk files out of it in seconds, without
// reading the repository. The repository's point stays the copy that
// survives the loss of the array.
//
// A kept snapshot is the same journal as a snapshot in use, in stage
// "kept", with what the run recorded of its VMs: Cleanup leaves it alone
// (no process owns it any more; its policy's retention does). Deleting a
// kept snapshot first rewrites its journal to stage "deleting" under the
// deleting process's PID, so a kill half-way through leaves a leftover
// that the next Cleanup finishes, never a kept snapshot with part of its
// files gone.

const (
	stageKept     = "kept"
	stageDeleting = "deleting"
)

// ErrKeptNotFound: no kept storage snapshot has the label asked for.
var ErrKeptNotFound = errors.New("no kept storage snapshot")

// Kept is a kept storage snapshot as Kept lists it.
type Kept struct {
	Label      string
	Kind       string
	Provider   string
	Datastore  string
	Connection string
	Policy     string
	JobID      int64
	// SnapshotMode is the VM snapshot mode the batch was taken with.
	SnapshotMode string
	Created      time.Time
	VMs          []hypervisor.KeptVM
	// Root is the datastore root the snapshot was taken of; Dir, for the
	// reflink and btrfs kinds, is where the snapshot is.
	Root, Dir string
}

func (j *journal) kept() Kept {
	return Kept{Label: j.Label, Kind: j.Kind, Provider: j.Provider, Datastore: j.Datastore, Connection: j.Connection,
		Policy: j.Policy, JobID: j.JobID, SnapshotMode: j.SnapshotMode, Created: j.Created, VMs: j.VMs, Root: j.Root, Dir: j.Dir}
}

// Keep implements hypervisor.StorageKeeper.
func (s *snapshot) Keep(_ context.Context, k hypervisor.KeptSnapshot) error {
	if k.Policy == "" {
		return fmt.Errorf("keeping storage snapshot %s: no policy to keep it for", s.j.Label)
	}
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return fmt.Errorf("storage snapshot %s is deleted", s.j.Label)
	}
	j := *s.j
	j.Stage, j.Policy, j.Connection, j.JobID, j.SnapshotMode, j.VMs = stageKept, k.Policy, k.Connection, k.JobID, k.SnapshotMode, k.VMs
	err := statefile.WriteJSON(s.path, &j)
	if err == nil {
		// The journal is the policy's now: this process deletes it no
		// more, whatever is called on it.
		s.j, s.deleted = &j, true
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("keeping storage snapshot %s: %w", j.Label, err)
	}
	step("kept")
	return nil
}

// PruneKept implements hypervisor.StorageKeeper.
func (s *snapshot) PruneKept(ctx context.Context, retain int) ([]string, error) {
	if retain < 1 {
		return nil, fmt.Errorf("pruning kept storage snapshots: retain must be at least 1, not %d", retain)
	}
	s.mu.Lock()
	j := *s.j
	s.mu.Unlock()
	if j.Stage != stageKept {
		return nil, fmt.Errorf("storage snapshot %s is not kept", j.Label)
	}
	return prune(ctx, s.stateDir(), &j, retain)
}

func (s *snapshot) stateDir() string { return filepath.Dir(filepath.Dir(s.path)) }

// prune deletes the kept snapshots of j's policy and datastore beyond the
// newest retain.
func prune(ctx context.Context, stateDir string, j *journal, retain int) ([]string, error) {
	pruned, err := pruneWhere(ctx, stateDir, retain, func(v *journal) bool {
		return v.Policy == j.Policy && v.Connection == j.Connection && v.Datastore == j.Datastore
	})
	var labels []string
	for _, k := range pruned {
		labels = append(labels, k.Label)
	}
	return labels, err
}

// pruneWhere deletes, per connection and datastore, the kept snapshots
// that match beyond the newest retain (0: all of them), and returns what
// it deleted. A snapshot that fails to delete does not stop the others.
func pruneWhere(ctx context.Context, stateDir string, retain int, match func(*journal) bool) ([]Kept, error) {
	all, err := keptJournals(stateDir)
	if err != nil {
		return nil, err
	}
	groups := map[[2]string][]statefile.Loaded[journal]{}
	for _, e := range all {
		if match(&e.Value) {
			k := [2]string{e.Value.Connection, e.Value.Datastore}
			groups[k] = append(groups[k], e)
		}
	}
	var pruned []Kept
	var errs []error
	for _, same := range groups {
		slices.SortFunc(same, func(a, b statefile.Loaded[journal]) int { // newest first
			return cmp.Or(b.Value.Created.Compare(a.Value.Created), strings.Compare(b.Value.Label, a.Value.Label))
		})
		// Oldest first: a run killed half-way leaves the newest ones.
		for _, e := range slices.Backward(same[min(max(retain, 0), len(same)):]) {
			if err := forget(ctx, e.Path, e.Value); err != nil {
				errs = append(errs, err)
				continue
			}
			pruned = append(pruned, e.Value.kept())
		}
	}
	slices.SortFunc(pruned, func(a, b Kept) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Label, b.Label)) })
	return pruned, errors.Join(errs...)
}

// forget deletes one kept snapshot: its journal first says "deleting",
// owned by this process, so that a kill half-way is finished by Cleanup.
func forget(ctx context.Context, path string, j journal) error {
	k, err := kindOf(&j)
	if err != nil {
		return err
	}
	j.Stage, j.PID = stageDeleting, os.Getpid()
	if err := statefile.WriteJSON(path, &j); err != nil {
		return fmt.Errorf("deleting kept storage snapshot %s: %w", j.Label, err)
	}
	step("forgetting")
	dctx, cancel := context.WithTimeout(ctx, j.timeout())
	defer cancel()
	if err := k.remove(dctx, &j); err != nil {
		return fmt.Errorf("deleting kept storage snapshot %s (cleanup retries at the next start): %w", j.Label, err)
	}
	step("forgotten")
	return statefile.Remove(path)
}

// keptJournals reads the journals of kept snapshots.
func keptJournals(stateDir string) ([]statefile.Loaded[journal], error) {
	if stateDir == "" {
		return nil, nil
	}
	js, err := statefile.ReadAll[journal](filepath.Join(stateDir, "storage-snapshots"))
	if err != nil {
		return nil, err
	}
	var out []statefile.Loaded[journal]
	for _, e := range js {
		if e.Value.Stage == stageKept && labelRE.MatchString(e.Value.Label) && filepath.Base(e.Path) == e.Value.Label+".json" {
			out = append(out, e)
		}
	}
	return out, nil
}

// List returns the kept storage snapshots, oldest first.
func List(stateDir string) ([]Kept, error) {
	js, err := keptJournals(stateDir)
	if err != nil {
		return nil, err
	}
	out := make([]Kept, 0, len(js))
	for _, e := range js {
		out = append(out, e.Value.kept())
	}
	slices.SortFunc(out, func(a, b Kept) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Label, b.Label)) })
	return out, nil
}

func findKept(stateDir, label string) (statefile.Loaded[journal], error) {
	js, err := keptJournals(stateDir)
	if err != nil {
		return statefile.Loaded[journal]{}, err
	}
	for _, e := range js {
		if e.Value.Label == label {
			return e, nil
		}
	}
	return statefile.Loaded[journal]{}, fmt.Errorf("%w named %s: `coffer storage-snapshots` lists them", ErrKeptNotFound, label)
}

// Forget deletes the kept storage snapshot label.
// It returns what the snapshot was.
func Forget(ctx context.Context, stateDir, label string) (Kept, error) {
	e, err := findKept(stateDir, label)
	if err != nil {
		return Kept{}, err
	}
	return e.Value.kept(), forget(ctx, e.Path, e.Value)
}

// RestoredDisk is one disk file a restore from a kept snapshot made.
type RestoredDisk struct {
	Disk   hypervisor.DiskInfo
	Target string
	offload.CopyStats
	Took time.Duration
}

// Restore makes copies of one VM's disk files, as they are in the kept
// snapshot label, in targetDir (each named as the original file): clones
// where the snapshot and targetDir share a reflink filesystem, so the VM's
// disks are back in seconds whatever their size. The snapshot itself is
// never handed out: writing to a restored disk cannot change it.
func Restore(ctx context.Context, stateDir, label, vm, targetDir string, o offload.CopyOptions) ([]RestoredDisk, error) {
	e, err := findKept(stateDir, label)
	if err != nil {
		return nil, err
	}
	j := e.Value
	found, err := keptVM(j, label, vm)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(targetDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("restore target %s is not a directory: create it first", targetDir)
	}
	var todo []restoreTarget
	seen := map[string]bool{}
	for _, d := range found.Disks {
		rel, err := relPath(j.Root, d.Path)
		if err != nil {
			return nil, err
		}
		dst := filepath.Join(targetDir, filepath.Base(d.Path))
		if seen[dst] {
			return nil, fmt.Errorf("two disks of %s are named %s: restore them one by one into different directories", vm, filepath.Base(d.Path))
		}
		seen[dst] = true
		if _, err := os.Lstat(dst); err == nil && !o.Overwrite {
			return nil, fmt.Errorf("%w: %s (move it away, or overwrite it)", offload.ErrTargetExists, dst)
		}
		todo = append(todo, restoreTarget{d, rel, dst})
	}
	return restoreFrom(ctx, j, label, vm, todo, o)
}

// restoreTarget is one disk file to make from a kept snapshot: the disk,
// its path below the datastore root, and the file to make.
type restoreTarget struct {
	d        hypervisor.DiskInfo
	rel, dst string
}

// keptVM finds a VM (by name or ID) in a kept snapshot.
func keptVM(j journal, label, vm string) (*hypervisor.KeptVM, error) {
	for i := range j.VMs {
		if j.VMs[i].Name == vm || j.VMs[i].ID == vm {
			return &j.VMs[i], nil
		}
	}
	var names []string
	for _, v := range j.VMs {
		names = append(names, v.Name)
	}
	return nil, fmt.Errorf("%w of VM %s named %s: it holds %s", ErrKeptNotFound, vm, label, strings.Join(names, ", "))
}

// restoreFrom presents the kept snapshot and copies each target's file
// out of it (clones where the filesystem can).
func restoreFrom(ctx context.Context, j journal, label, vm string, todo []restoreTarget, o offload.CopyOptions) ([]RestoredDisk, error) {
	k, err := kindOf(&j)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, j.timeout())
	dir, err := k.present(pctx, &j)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("presenting storage snapshot %s: %w", label, err)
	}
	var out []RestoredDisk
	for _, p := range todo {
		start := time.Now()
		st, err := offload.CopyFile(ctx, filepath.Join(dir, p.rel), p.dst, o)
		if err != nil {
			return out, fmt.Errorf("disk %s of %s from storage snapshot %s: %w", p.d.Name, vm, label, err)
		}
		out = append(out, RestoredDisk{Disk: p.d, Target: p.dst, CopyStats: st, Took: time.Since(start)})
	}
	return out, nil
}

// ErrDiskInUse: a disk file to be replaced is open in a QEMU process (or
// anything else holding a lock on it).
var ErrDiskInUse = errors.New("disk file in use")

// RestoreOntoOriginal puts a VM's disk files back as they are in the kept
// snapshot label, in place of the production files: each is replaced, in
// one rename, by a clone of the snapshot's (the VM then runs on the
// clones; the snapshot is untouched). The VM must be shut off: a disk file
// that a process holds a lock on (QEMU locks its images) is refused, and
// every disk is checked before any is replaced.
func RestoreOntoOriginal(ctx context.Context, stateDir, label, vm string, o offload.CopyOptions) ([]RestoredDisk, error) {
	e, err := findKept(stateDir, label)
	if err != nil {
		return nil, err
	}
	j := e.Value
	v, err := keptVM(j, label, vm)
	if err != nil {
		return nil, err
	}
	for _, d := range v.Disks {
		if err := notInUse(d.Path); err != nil {
			return nil, err
		}
	}
	o.Overwrite = true
	todo := make([]restoreTarget, 0, len(v.Disks))
	owners := map[string]os.FileInfo{}
	for _, d := range v.Disks {
		rel, err := relPath(j.Root, d.Path)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(d.Path); err == nil {
			owners[d.Path] = fi
		}
		todo = append(todo, restoreTarget{d, rel, d.Path})
	}
	out, err := restoreFrom(ctx, j, label, vm, todo, o)
	// The hypervisor runs the VM as the owner of its disk files (libvirt's
	// qemu user): the restored ones keep the originals' owner and mode.
	for _, r := range out {
		if fi, ok := owners[r.Target]; ok {
			st := fi.Sys().(*syscall.Stat_t)
			err = errors.Join(err, os.Chown(r.Target, int(st.Uid), int(st.Gid)), os.Chmod(r.Target, fi.Mode().Perm()))
		}
	}
	return out, err
}

// notInUse refuses a file that some process holds a lock on: QEMU takes
// OFD locks on the images it has open, so a running VM's disk has some.
func notInUse(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // opened only to query locks
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return fmt.Errorf("checking whether %s is in use: %w", path, err)
	}
	if lk.Type != unix.F_UNLCK {
		return fmt.Errorf("%w: %s is open in a running VM (or another program holds a lock on it): shut the VM off first", ErrDiskInUse, path)
	}
	return nil
}

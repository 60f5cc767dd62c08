// Package storagesnap provides the storage-level snapshots that policies
// with `group: datastore` read their VMs from (hypervisor.StorageSnapshotter):
//
//   - reflink: a datastore is a directory on a filesystem with reflinks
//     (XFS with reflink=1, btrfs); a snapshot clones (FICLONE) every disk
//     file of the batch into <root>/.coffer-snap/<label>/.
//   - btrfs: a datastore root is a btrfs subvolume; a snapshot is one
//     read-only subvolume snapshot, <root>/.coffer-snap/<label>.
//   - exec: the site's own program drives its array (see exec.go for the
//     contract).
//
// The engine holds the VMs still (hypervisor.SnapshotRequest.Hold) while a
// provider creates the snapshot, so the disk files are complete and
// unchanging (a vSphere VM is not stopped: its VM snapshot leaves its
// base disk files unchanged while a delta takes the writes); the provider
// only ever touches storage. A vSphere datastore is named "[name]" and
// only the exec kind snapshots it; its disks' files are found in the
// presented snapshot by their paths on the datastore.
//
// Every provider journals what it is about to create, under the state
// directory, before creating it; Cleanup removes what the journals of dead
// coffer processes name, and nothing else: a provider never lists or
// deletes snapshots it did not journal.
package storagesnap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// DefaultTimeout bounds one provider step when the entry sets none.
const DefaultTimeout = 2 * time.Minute

// SnapDir is the directory, in a datastore root, that reflink and btrfs
// snapshots are made in.
const SnapDir = ".coffer-snap"

// labelRE is what a label may look like: it names a directory and an
// exec argument, so no path separators or shell-special characters.
var labelRE = regexp.MustCompile(`^coffer-[A-Za-z0-9._-]{1,200}$`)

// killPoint, when set (by this package's tests only), is called at every
// step of creating and deleting a snapshot, so a test process can be
// killed exactly there.
var killPoint func(step string)

func step(name string) {
	if killPoint != nil {
		killPoint(name)
	}
}

// For returns, for each connection that the section covers, the
// StorageSnapshotter the engine uses for its datastores.
func For(cfg policy.StorageSnapshots, stateDir string, log *slog.Logger) map[string]hypervisor.StorageSnapshotter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := map[string]hypervisor.StorageSnapshotter{}
	for _, p := range cfg {
		for _, c := range p.Connections {
			if out[c] == nil {
				out[c] = &Router{cfg: cfg, connection: c, stateDir: stateDir, log: log}
			}
		}
	}
	return out
}

// Router snapshots each datastore of one connection with the provider
// that covers it.
type Router struct {
	cfg        policy.StorageSnapshots
	connection string
	stateDir   string
	log        *slog.Logger
}

// SnapshotDatastore implements hypervisor.StorageSnapshotter.
func (r *Router) SnapshotDatastore(ctx context.Context, datastore, label string, disks []hypervisor.DiskInfo) (hypervisor.StorageSnapshot, error) {
	paths := make([]string, len(disks))
	for i, d := range disks {
		paths[i] = d.Path
	}
	p, root, ok := r.cfg.ProviderOf(r.connection, datastore, paths)
	if !ok {
		return nil, fmt.Errorf("%w: no storage-snapshots provider of connection %s covers datastore %s: add the directory (or one above it) to a provider's datastores, "+
			"or set storage-fallback: vm on the policy to back these VMs up one by one", hypervisor.ErrStorageUnsupported, r.connection, datastore)
	}
	return Create(ctx, p, root, r.stateDir, label, disks)
}

// CleanupLeftovers implements hypervisor.StorageCleaner.
func (r *Router) CleanupLeftovers(ctx context.Context) ([]hypervisor.Leftover, error) {
	return Cleanup(ctx, r.stateDir)
}

// Check says whether a provider can snapshot a datastore root, without
// creating anything that could be left behind; policy check reports it.
func Check(ctx context.Context, p policy.StorageProvider, root string) error {
	switch p.Kind {
	case "reflink":
		return checkReflink(root)
	case "btrfs":
		return checkBtrfs(ctx, root)
	case "exec":
		return checkExec(p)
	}
	return fmt.Errorf("unknown storage snapshot kind %q", p.Kind)
}

// journal records one snapshot before it is created.
type journal struct {
	Label     string    `json:"label"`
	Kind      string    `json:"kind"`
	Provider  string    `json:"provider"`
	Datastore string    `json:"datastore"`
	Root      string    `json:"root"`
	Dir       string    `json:"dir,omitempty"` // reflink: clone directory; btrfs: snapshot subvolume
	Command   []string  `json:"command,omitempty"`
	Changes   bool      `json:"changes,omitempty"` // exec: the command answers "changed"
	Timeout   int64     `json:"timeout_ns,omitempty"`
	PID       int       `json:"coffer_pid"`
	Created   time.Time `json:"created"`
	Stage     string    `json:"stage"` // creating, created, kept, deleting

	// What a kept snapshot (stage kept, see kept.go) records of its run.
	Policy       string              `json:"policy,omitempty"`
	Connection   string              `json:"connection,omitempty"`
	JobID        int64               `json:"job_id,omitempty"`
	SnapshotMode string              `json:"snapshot_mode,omitempty"`
	VMs          []hypervisor.KeptVM `json:"vms,omitempty"`
}

func writeJournal(stateDir string, j *journal) error {
	return statefile.WriteJSON(journalPath(stateDir, j.Label), j)
}

func journalPath(stateDir, label string) string {
	return filepath.Join(stateDir, "storage-snapshots", label+".json")
}

func (j *journal) timeout() time.Duration {
	if j.Timeout > 0 {
		return time.Duration(j.Timeout)
	}
	return DefaultTimeout
}

// Create takes a snapshot of the datastore root with provider p.
func Create(ctx context.Context, p policy.StorageProvider, root, stateDir, label string, disks []hypervisor.DiskInfo) (hypervisor.StorageSnapshot, error) {
	if !labelRE.MatchString(label) {
		return nil, fmt.Errorf("storage snapshot label %q must be coffer- followed by letters, digits, dots, dashes or underscores", label)
	}
	if stateDir == "" {
		return nil, errors.New("storage snapshots need a state directory for their journal")
	}
	root = filepath.Clean(root)
	for _, d := range disks {
		if _, err := relPath(root, d.Path); err != nil {
			return nil, err
		}
	}
	j := &journal{Label: label, Kind: p.Kind, Provider: p.Name, Datastore: root, Root: root, PID: os.Getpid(),
		Created: time.Now(), Stage: "creating", Timeout: int64(time.Duration(p.Timeout))}
	k, err := kindOf(j)
	if err != nil {
		return nil, err
	}
	if p.Kind == "exec" {
		j.Command, j.Changes = p.Command, p.Changes
	} else {
		j.Dir = filepath.Join(root, SnapDir, label)
	}
	path := journalPath(stateDir, label)
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("storage snapshot %s exists already", label)
	}
	if p.Kind != "exec" {
		if err := checkFree(root, p.MinFree); err != nil {
			return nil, err
		}
	}
	if err := statefile.WriteJSON(path, j); err != nil {
		return nil, fmt.Errorf("storage snapshot journal: %w", err)
	}
	step("journaled")
	cctx, cancel := context.WithTimeout(ctx, j.timeout())
	defer cancel()
	s := &snapshot{j: j, k: k, path: path}
	if err := k.create(cctx, j, disks); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (timeout %s: raise the provider's timeout if the storage is this slow)", err, j.timeout())
		}
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%w: datastore %s filled up while the snapshot was being made (%w); the partial snapshot is deleted and production's disks are untouched: "+
				"free space on it, raise the provider's min-free, or set storage-fallback: vm", hypervisor.ErrStorageUnsupported, root, err)
		}
		if derr := s.Delete(context.WithoutCancel(ctx)); derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting the partial snapshot (cleanup will retry at the next start): %w", derr))
		}
		return nil, fmt.Errorf("%s snapshot %s of %s: %w", p.Kind, label, root, err)
	}
	j.Stage = "created"
	if err := statefile.WriteJSON(path, j); err != nil {
		_ = s.Delete(context.WithoutCancel(ctx)) // unjournalled: best effort, the error is returned
		return nil, fmt.Errorf("storage snapshot journal: %w", err)
	}
	step("created")
	return s, nil
}

// kind is one provider mechanism. create and remove act only on what the
// journal names; remove is idempotent (what is gone is done).
type kind interface {
	create(ctx context.Context, j *journal, disks []hypervisor.DiskInfo) error
	// present returns the directory in which the snapshot shows the
	// datastore root's files.
	present(ctx context.Context, j *journal) (string, error)
	remove(ctx context.Context, j *journal) error
}

func kindOf(j *journal) (kind, error) {
	switch j.Kind {
	case "reflink":
		return reflinkKind{}, nil
	case "btrfs":
		return btrfsKind{}, nil
	case "exec":
		return &execKind{}, nil
	}
	return nil, fmt.Errorf("unknown storage snapshot kind %q", j.Kind)
}

type snapshot struct {
	j    *journal
	k    kind
	path string

	mu      sync.Mutex
	dir     string
	deleted bool
}

// OpenDisk implements hypervisor.StorageSnapshot: the disk file as it is
// in the snapshot, read through qemu-nbd (which understands its format).
func (s *snapshot) OpenDisk(ctx context.Context, vm hypervisor.VMRef, disk hypervisor.DiskInfo) (hypervisor.DiskReader, error) {
	rel, err := relPath(s.j.Root, disk.Path)
	if err != nil {
		return nil, err
	}
	dir, err := s.presented(ctx)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, rel)
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("disk %s of %s is not in storage snapshot %s: %w", disk.Path, vm.Name, s.j.Label, hypervisor.ErrNotFound)
	}
	return openImage(ctx, file, disk.Format)
}

// presented returns the directory in which the snapshot shows the
// datastore root's files, presenting it at the first call.
func (s *snapshot) presented(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted && s.j.Stage != stageKept {
		return "", fmt.Errorf("storage snapshot %s is deleted", s.j.Label)
	}
	if s.dir == "" {
		pctx, cancel := context.WithTimeout(ctx, s.j.timeout())
		dir, err := s.k.present(pctx, s.j)
		cancel()
		if err != nil {
			return "", fmt.Errorf("presenting storage snapshot %s: %w", s.j.Label, err)
		}
		s.dir = dir
	}
	return s.dir, nil
}

// Delete implements hypervisor.StorageSnapshot.
func (s *snapshot) Delete(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return nil
	}
	step("deleting")
	dctx, cancel := context.WithTimeout(ctx, s.j.timeout())
	defer cancel()
	if err := s.k.remove(dctx, s.j); err != nil {
		return fmt.Errorf("deleting storage snapshot %s: %w", s.j.Label, err)
	}
	step("deleted")
	s.deleted = true
	return statefile.Remove(s.path)
}

// Cleanup deletes the snapshots journaled by coffer processes that are
// gone, and only those.
func Cleanup(ctx context.Context, stateDir string) ([]hypervisor.Leftover, error) {
	if stateDir == "" {
		return nil, nil
	}
	js, err := statefile.ReadAll[journal](filepath.Join(stateDir, "storage-snapshots"))
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Leftover
	var errs []error
	for _, l := range js {
		j := l.Value
		if j.Stage == stageKept {
			continue // a policy's restore point: its retention deletes it
		}
		if j.PID == os.Getpid() || statefile.ProcessAlive(j.PID) {
			continue // a live coffer's snapshot: it deletes it itself
		}
		if !labelRE.MatchString(j.Label) || filepath.Base(l.Path) != j.Label+".json" {
			continue // not a journal of this package
		}
		k, err := kindOf(&j)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Path, err))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, j.timeout())
		err = k.remove(cctx, &j)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("storage snapshot %s of %s (cleanup retries at the next start): %w", j.Label, j.Root, err))
			continue
		}
		if err := statefile.Remove(l.Path); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, hypervisor.Leftover{VM: hypervisor.VMRef{Name: "datastore " + j.Datastore}, Kind: "storage-snapshot", Name: j.Label, Action: "removed"})
	}
	return out, errors.Join(errs...)
}

// relPath is a disk file's path relative to the datastore root: for a
// vSphere datastore ("[name]"), its path on the datastore.
func relPath(root, file string) (string, error) {
	if policy.IsVSphereDatastore(root) {
		return vsphereRel(root, file)
	}
	rel, err := filepath.Rel(root, filepath.Clean(file))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: disk file %s is not below datastore %s", hypervisor.ErrStorageUnsupported, file, root)
	}
	if strings.HasPrefix(rel, SnapDir+"/") {
		return "", fmt.Errorf("disk file %s is inside coffer's snapshot directory %s", file, filepath.Join(root, SnapDir))
	}
	return rel, nil
}

// vsphereRel is the path of a vSphere disk file ("[ds] vm/vm.vmdk") on
// its datastore ("vm/vm.vmdk"), refused when it is on another datastore
// or leaves the datastore.
func vsphereRel(root, file string) (string, error) {
	entry, rel, ok := policy.VSpherePath(file)
	if !ok || entry != root {
		return "", fmt.Errorf("%w: disk file %s is not on vSphere datastore %s", hypervisor.ErrStorageUnsupported, file, root)
	}
	clean := filepath.Clean(rel)
	if rel == "" || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("disk file %s: %q is not a path on datastore %s", file, rel, root)
	}
	return clean, nil
}

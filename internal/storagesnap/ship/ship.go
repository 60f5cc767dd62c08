// Package ship sends the kept snapshots of btrfs datastores to a second
// btrfs filesystem (the DR site's) with `btrfs send` and `btrfs receive`,
// each incrementally against the newest one shipped before it (`send -p`),
// so that the DR site has the datastore as of each kept snapshot. Those of
// reflink datastores go to a second reflink filesystem, the changed
// extents only (reflink.go).
//
// A copy counts once it is recorded: `btrfs receive` makes the subvolume
// <ship-to>/<label>, and only after it exits successfully is the snapshot's
// record written (atomically) in <ship-to>/storage-snapshots. A receive
// killed half-way leaves a subvolume without a record; the next shipment
// deletes every such subvolume first (a received subvolume cannot be
// renamed into place, being read-only, so the record is what marks it
// complete) and ships the snapshot again. The copies are kept snapshots of
// the state directory <ship-to> (storagesnap.RecordShipped), so
// storagesnap.Restore clones a VM's disks out of them at the DR site.
package ship

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/storagesnap"
)

// Shipped is one kept snapshot sent by a shipment.
type Shipped struct {
	Label     string
	Provider  string
	Datastore string
	To        string // the directory shipped to
	Parent    string // the label sent against ("": sent whole)
	Bytes     int64  // the size of the send stream
	Took      time.Duration
}

// Target is where one provider's kept snapshots go.
type Target struct {
	Provider string // the storage-snapshots entry's name
	Kind     string // its kind: btrfs ("" too) or reflink
	To       string // its ship-to
}

// kind is the kind of snapshots the target's provider makes.
func (t Target) kind() string { return cmp.Or(t.Kind, "btrfs") }

// killPoint, set by this package's tests only, is called at each step of
// a shipment so that a test process can be killed there.
var killPoint func(step string)

func step(name string) {
	if killPoint != nil {
		killPoint(name)
	}
}

const btrfsMagic = 0x9123683E

// Ship sends every kept snapshot of stateDir that a target's provider
// made and that is not yet at the target, oldest first per datastore.
// A snapshot that fails stops the shipment of its datastore (a later one
// would need it as parent) but not the others'.
func Ship(ctx context.Context, stateDir string, targets []Target) ([]Shipped, error) {
	kept, err := storagesnap.List(stateDir)
	if err != nil {
		return nil, err
	}
	var out []Shipped
	var errs []error
	for _, t := range targets {
		var mine []storagesnap.Kept
		for _, k := range kept {
			if k.Provider == t.Provider && k.Kind == t.kind() {
				mine = append(mine, k)
			}
		}
		got, err := shipTo(ctx, stateDir, t, mine)
		out = append(out, got...)
		if err != nil {
			errs = append(errs, fmt.Errorf("shipping provider %s's snapshots to %s: %w", t.Provider, t.To, err))
		}
	}
	return out, errors.Join(errs...)
}

// shipTo ships kept (all of t's provider) to t's directory.
func shipTo(ctx context.Context, stateDir string, t Target, kept []storagesnap.Kept) ([]Shipped, error) {
	to, reflink := t.To, t.kind() == "reflink"
	if err := checkTarget(to, reflink); err != nil {
		return nil, err
	}
	unlock, err := lockTarget(to)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if reflink {
		err = dropUnrecordedCopies(to)
	} else {
		err = dropUnrecorded(ctx, to)
	}
	if err != nil {
		return nil, err
	}
	there, err := storagesnap.List(to)
	if err != nil {
		return nil, err
	}
	shipped := map[string]bool{}
	for _, k := range there {
		shipped[k.Label] = storagesnap.IsSubvolume(k.Dir) || reflink && isDir(k.Dir)
	}
	byRoot := map[string][]storagesnap.Kept{}
	for _, k := range kept {
		byRoot[k.Root] = append(byRoot[k.Root], k)
	}
	var out []Shipped
	var errs []error
	for _, root := range slices.Sorted(maps.Keys(byRoot)) {
		same := byRoot[root]
		slices.SortFunc(same, func(a, b storagesnap.Kept) int {
			return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Label, b.Label))
		})
		parent := ""
		for _, k := range same {
			if shipped[k.Label] {
				parent = k.Dir
				continue
			}
			ship := shipOne
			if reflink {
				ship = shipReflink
			}
			s, err := ship(ctx, stateDir, to, k, parent)
			if err != nil {
				errs = append(errs, err)
				break
			}
			out = append(out, s)
			shipped[k.Label], parent = true, k.Dir
		}
	}
	return out, errors.Join(errs...)
}

// checkTarget: the directory must be on btrfs (receive makes subvolumes),
// or for reflink snapshots on a filesystem that clones files (each copy
// starts as a clone of the previous one); it is made if missing.
func checkTarget(to string, reflink bool) error {
	if !filepath.IsAbs(to) {
		return fmt.Errorf("ship-to %q is not an absolute directory", to)
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	if reflink {
		if err := storagesnap.CheckReflink(to); err != nil {
			return fmt.Errorf("ship-to %s: %w", to, err)
		}
		return nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(to, &fs); err != nil {
		return fmt.Errorf("ship-to %s: %w", to, err)
	}
	if uint32(fs.Type) != btrfsMagic {
		return fmt.Errorf("ship-to %s is not on btrfs: btrfs receive needs a btrfs filesystem", to)
	}
	return nil
}

// lockTarget makes one shipment at a time into to: another would take
// the subvolume being received for one to delete.
func lockTarget(to string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(to, ".coffer-ship.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another shipment into %s is running: %w", to, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// dropUnrecorded deletes the subvolumes of to that have no record: what a
// killed shipment received, whole or not. Only subvolumes named as
// labels are considered; anything else there is not coffer's.
func dropUnrecorded(ctx context.Context, to string) error {
	entries, err := os.ReadDir(to)
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	there, err := storagesnap.List(to)
	if err != nil {
		return err
	}
	for _, k := range there {
		recorded[k.Label] = true
	}
	for _, e := range entries {
		dir := filepath.Join(to, e.Name())
		if recorded[e.Name()] || !storagesnap.LabelOK(e.Name()) || !storagesnap.IsSubvolume(dir) {
			continue
		}
		if err := btrfs(ctx, "subvolume", "delete", dir); err != nil {
			return fmt.Errorf("deleting %s, left by an interrupted shipment: %w", dir, err)
		}
	}
	return nil
}

// shipOne sends k (against parent, a kept snapshot's directory, when not
// empty) into to and records it there.
func shipOne(ctx context.Context, stateDir, to string, k storagesnap.Kept, parent string) (Shipped, error) {
	start := time.Now()
	if !storagesnap.IsSubvolume(k.Dir) {
		return Shipped{}, fmt.Errorf("kept snapshot %s: %s is not a btrfs subvolume", k.Label, k.Dir)
	}
	args := []string{"send", "-q"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	n, err := pipe(ctx, exec.CommandContext(ctx, "btrfs", append(args, k.Dir)...), exec.CommandContext(ctx, "btrfs", "receive", to))
	if err != nil {
		return Shipped{}, fmt.Errorf("shipping %s: %w", k.Label, err)
	}
	step("received")
	dir := filepath.Join(to, k.Label)
	if !storagesnap.IsSubvolume(dir) {
		return Shipped{}, fmt.Errorf("shipping %s: btrfs receive made no subvolume %s", k.Label, dir)
	}
	if err := storagesnap.RecordShipped(stateDir, k.Label, to, dir); err != nil {
		return Shipped{}, fmt.Errorf("recording %s as shipped: %w", k.Label, err)
	}
	step("recorded")
	s := Shipped{Label: k.Label, Provider: k.Provider, Datastore: k.Datastore, To: to, Bytes: n, Took: time.Since(start)}
	if parent != "" {
		s.Parent = filepath.Base(parent)
	}
	return s, nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

func btrfs(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "btrfs", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("btrfs %v: %v: %s", args, err, out)
	}
	return nil
}

package storagesnap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// btrfsKind takes one read-only snapshot of the subvolume that is the
// datastore root: atomic for every file in it, whatever the number of
// VMs. Subvolumes nested below the root are not in the snapshot (btrfs
// snapshots are not recursive), so disks must live in the root subvolume.
type btrfsKind struct{}

const btrfsMagic = 0x9123683E

// checkBtrfs: the root must be a subvolume (a btrfs directory whose inode
// is 256, the first inode of every subvolume) and btrfs-progs installed.
func checkBtrfs(_ context.Context, root string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err != nil {
		return fmt.Errorf("datastore %s: %w", root, err)
	}
	if uint32(fs.Type) != btrfsMagic {
		return fmt.Errorf("%w: datastore %s is not on btrfs: use kind: reflink for XFS, or storage-fallback: vm", hypervisor.ErrStorageUnsupported, root)
	}
	if !isSubvolume(root) {
		return fmt.Errorf("%w: datastore %s is a directory, not a btrfs subvolume: create it with `btrfs subvolume create` and move the disks into it, or name the subvolume above it",
			hypervisor.ErrStorageUnsupported, root)
	}
	if _, err := exec.LookPath("btrfs"); err != nil {
		return fmt.Errorf("the btrfs provider needs the btrfs command (package btrfs-progs): %w", err)
	}
	return nil
}

func isSubvolume(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Ino == 256
}

func (btrfsKind) create(ctx context.Context, j *journal, _ []hypervisor.DiskInfo) error {
	if err := checkBtrfs(ctx, j.Root); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(j.Root, SnapDir), 0o700); err != nil {
		return err
	}
	return btrfs(ctx, "subvolume", "snapshot", "-r", j.Root, j.Dir)
}

func (btrfsKind) present(_ context.Context, j *journal) (string, error) { return j.Dir, nil }

// remove deletes the journaled snapshot subvolume: only at the path the
// label names, and only if it is a subvolume (a plain directory there is
// not coffer's).
func (btrfsKind) remove(ctx context.Context, j *journal) error {
	if j.Dir != filepath.Join(j.Root, SnapDir, j.Label) || !labelRE.MatchString(j.Label) {
		return fmt.Errorf("journal names %s, which is not a coffer snapshot: left alone", j.Dir)
	}
	if _, err := os.Lstat(j.Dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if !isSubvolume(j.Dir) {
		return fmt.Errorf("%s is not a btrfs subvolume: not coffer's snapshot, left alone", j.Dir)
	}
	return btrfs(ctx, "subvolume", "delete", j.Dir)
}

func btrfs(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "btrfs", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("btrfs %v: %v: %s", args, err, out)
	}
	return nil
}

package storagesnap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// checkFree refuses to snapshot a datastore with less free space than the
// provider's min-free. A held reflink clone or btrfs snapshot shares every
// block with production, so each block the VMs overwrite during the
// backup takes new space: on a nearly full datastore it is production's
// writes that would fail. The refusal wraps ErrStorageUnsupported, so a
// policy with storage-fallback: vm backs the VMs up one by one instead.
func checkFree(root string, minFree policy.MinFree) error {
	total, free, err := space(root)
	if err != nil {
		return err
	}
	need, err := minFree.Bytes(total)
	if err != nil {
		return err
	}
	if free < need {
		// XFS (and btrfs) give a removed file's blocks back in the
		// background, and statfs does not wait: right after the previous
		// snapshot was deleted the datastore looks fuller than it is.
		// syncfs finishes those frees; look once more before refusing.
		if err := syncFS(root); err != nil {
			return err
		}
		if total, free, err = space(root); err != nil {
			return err
		}
	}
	if free < need {
		return fmt.Errorf("%w: datastore %s has %s free of %s, below the provider's min-free %s (%s): a snapshot held during the backup "+
			"would make production's overwrites take the rest; free space on it, lower min-free, or set storage-fallback: vm",
			hypervisor.ErrStorageUnsupported, root, mib(free), mib(total), minFreeText(minFree), mib(need))
	}
	return nil
}

// space is the datastore's size and the bytes free to unprivileged use.
func space(root string) (total, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, 0, fmt.Errorf("datastore %s: %w", root, err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

func syncFS(root string) error {
	d, err := os.Open(root)
	if err != nil {
		return fmt.Errorf("datastore %s: %w", root, err)
	}
	defer func() { _ = d.Close() }() // opened read-only to syncfs
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("datastore %s: syncfs: %w", root, err)
	}
	return nil
}

func minFreeText(m policy.MinFree) string {
	if m == "" {
		return policy.DefaultMinFree + " (the default)"
	}
	return string(m)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

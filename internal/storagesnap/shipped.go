package storagesnap

import (
	"fmt"
	"path/filepath"
)

// A kept btrfs or reflink snapshot shipped to a second filesystem (internal/storagesnap/ship)
// is recorded there as a kept snapshot of its own, in a state directory of
// the same layout as the server's: the directory shipped to is the state
// directory of its copies. List and Restore then work on it as on the
// server's, so instant recovery from a storage snapshot works at the DR
// site on the copy. The record keeps the datastore root the snapshot was
// taken of (a disk's path below it names its file in the copy) and names
// the copy's subvolume as the snapshot's directory.

// RecordShipped records, in the state directory shipDir, the kept
// snapshot label of stateDir as present in dir. It is written atomically
// (a crash leaves it whole or absent): a copy counts once recorded.
func RecordShipped(stateDir, label, shipDir, dir string) error {
	e, err := findKept(stateDir, label)
	if err != nil {
		return err
	}
	j := e.Value
	if j.Kind != "btrfs" && j.Kind != "reflink" {
		return fmt.Errorf("storage snapshot %s is of kind %s: only btrfs and reflink snapshots are shipped", label, j.Kind)
	}
	if filepath.Dir(dir) != shipDir || filepath.Base(dir) != label {
		return fmt.Errorf("shipped copy %s of %s is not %s/%s", dir, label, shipDir, label)
	}
	j.Dir, j.PID = dir, 0
	return writeJournal(shipDir, &j)
}

// IsSubvolume says whether path is the root of a btrfs subvolume.
func IsSubvolume(path string) bool { return isSubvolume(path) }

// LabelOK says whether name can be a storage snapshot's label.
func LabelOK(name string) bool { return labelRE.MatchString(name) }

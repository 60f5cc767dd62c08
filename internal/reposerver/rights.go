package reposerver

import (
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/store"
)

// Right is what one credential may do with the repository.
type Right string

// The rights, each a superset of reading.
const (
	// Read: restores and verify. Reads, and the leases that keep what
	// it reads from gc (a lease is a note, not data).
	Read Right = "read"
	// Append: backups. Read, write new objects, and hold leases: a
	// stolen append credential cannot overwrite or delete one object of
	// the repository's data, index or points.
	Append Right = "append"
	// Maintain: forget, gc, repair and key changes. It may replace and
	// delete objects, except those under retention.
	Maintain Right = "maintain"
)

// ParseRight reads a right's name.
func ParseRight(s string) (Right, error) {
	switch r := Right(strings.ToLower(strings.TrimSpace(s))); r {
	case Read, Append, Maintain:
		return r, nil
	}
	return "", fmt.Errorf("%q is not a right (read, append or maintain)", s)
}

// leasePrefix is where the repository keeps its leases (internal/repo's
// locks/): the only names a read or append credential may write, replace
// or delete, because a backup, a restore or a verify takes, refreshes,
// ends and releases its lease.
const leasePrefix = "locks/"

func isLease(name string) bool { return strings.HasPrefix(name, leasePrefix) }

// checkPut says whether r may write name with opts, and tightens opts: an
// append credential writes new objects only, so every write outside the
// leases is made conditional on the name being free.
func (r Right) checkPut(name string, opts *store.PutOptions) error {
	switch {
	case r == Maintain || isLease(name):
		return nil
	case r == Append && opts.IfMatch != "":
		return fmt.Errorf("%w: an append credential may not replace %s", store.ErrPermission, name)
	case r == Append:
		opts.IfNotExists = true
		return nil
	}
	return fmt.Errorf("%w: this %s credential may not write %s", store.ErrPermission, r, name)
}

// checkDelete says whether r may delete name.
func (r Right) checkDelete(name string) error {
	if r == Maintain || isLease(name) {
		return nil
	}
	return fmt.Errorf("%w: this %s credential may not delete %s", store.ErrPermission, r, name)
}

// checkName refuses names that are not store names before they reach
// the store: no empty, dot or climbing segment, only [A-Za-z0-9._-].
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("no object name")
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg[0] == '.' {
			return fmt.Errorf("invalid object name %q", name)
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return fmt.Errorf("invalid object name %q", name)
			}
		}
	}
	return nil
}

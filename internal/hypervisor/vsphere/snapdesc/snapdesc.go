// Package snapdesc writes and reads the description of the VM snapshots
// coffer takes through vSphere: it tells coffer's snapshots from
// look-alikes, names the installation (the state directory) that
// journalled the snapshot and, for a fleet worker's, the worker's
// registration that owns it, so that another worker can tell a dead
// owner's leftover from a backup running elsewhere.
package snapdesc

import (
	"fmt"
	"strings"
)

// Prefix starts every description coffer writes.
const Prefix = "coffer backup session"

// Of is the description of session's snapshot, journalled by the
// installation stateID, owned by owner; one without an owner reads as a
// single coffer's always did.
func Of(session, stateID, owner string) string {
	desc := fmt.Sprintf(Prefix+" %s (installation %s", session, stateID)
	if owner != "" {
		return desc + OwnerMark(owner) + "; removed automatically"
	}
	return desc + "); removed automatically"
}

// OwnerMark is what a description says about its owner.
func OwnerMark(owner string) string { return ", owner " + owner + ")" }

// suspendedMark follows the owner's when the owner suspended the VM
// around the snapshot (suspend mode).
const suspendedMark = "; VM suspended by coffer"

// OfSuspended is Of for a session that suspended the VM: a worker that
// finds its owner dead powers the VM back on if it is still suspended
// from then.
func OfSuspended(session, stateID, owner string) string {
	desc := Of(session, stateID, owner)
	base, _ := strings.CutSuffix(desc, "; removed automatically")
	return base + suspendedMark + "; removed automatically"
}

// Suspended reports whether a description says its owner suspended the
// VM around the snapshot.
func Suspended(desc string) bool { return strings.Contains(desc, suspendedMark) }

// Owner is the owner a description names, or "" (a single coffer's, or
// an older coffer's snapshot).
func Owner(desc string) string {
	_, rest, ok := strings.Cut(desc, ", owner ")
	if !ok {
		return ""
	}
	owner, _, ok := strings.Cut(rest, ")")
	if !ok {
		return ""
	}
	return owner
}

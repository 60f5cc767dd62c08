package groupread

import (
	"context"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Change tracking that survives power-off. A group run reads its VMs from
// a storage snapshot; when the policy keeps storage snapshots, the base
// point's run left its own on the datastore. If the hypervisor lost a
// disk's change tracking since (a QEMU crash or a host reboot takes the
// dirty bitmaps with it), the storage can still tell what changed between
// the two snapshots (hypervisor.StorageChangeTracker), and the disk is
// read incrementally instead of in full. The backup's self-check samples
// the spans called unchanged, as for any change set, and reads the disk
// in full at once if one differs.

// trackFromStorage fills the session's change sets from the storage for
// the disks whose tracking the hypervisor lost.
func (s *storageSession) trackFromStorage(ctx context.Context) {
	h := s.h
	tracker, ok := h.Storage.(hypervisor.StorageChangeTracker)
	if !ok || h.Plan.Base == nil || h.Plan.Base.JobID == 0 {
		return // no storage snapshot of the base's run to compare with
	}
	since := h.Plan.Since()
	for _, d := range s.Session.Disks() {
		if d.Kind != hypervisor.KindDisk || (d.Changes != "full" && d.Changes != "") || since[d.Key] == "" {
			continue // tracked by the hypervisor, or no base to be incremental to
		}
		ext, base, err := tracker.ChangedSince(ctx, h.Plan.Base.JobID, h.VM.VMRef, d.DiskInfo)
		if err != nil {
			s.notes = append(s.notes, fmt.Sprintf("%s: no change set from the storage either (%v)", d.Key, err))
			continue
		}
		if s.fromStorage == nil {
			s.fromStorage = map[string][]hypervisor.Extent{}
		}
		s.fromStorage[d.Key] = ext
		var n int64
		for _, e := range ext {
			n += e.Length
		}
		s.notes = append(s.notes, fmt.Sprintf("%s: %s; the %s change set comes from the storage instead: %d of %d bytes changed since storage snapshot %s",
			d.Key, strings.TrimSuffix(d.ChangeWarning, "; reading the whole disk"), h.Plan.Mode, n, d.Size, base))
	}
}

// Disks reports the disks whose change sets come from the storage as
// incremental (or differential), not as read in full.
func (s *storageSession) Disks() []hypervisor.DiskSnapshot {
	ds := s.Session.Disks()
	if len(s.fromStorage) == 0 {
		return ds
	}
	out := make([]hypervisor.DiskSnapshot, len(ds))
	for i, d := range ds {
		if _, ok := s.fromStorage[d.Key]; ok {
			d.Changes, d.ChangeWarning = s.h.Plan.Mode, "" // incremental or differential: the base exists
		}
		out[i] = d
	}
	return out
}

// Warnings says what the storage's change sets stood in for, in place of
// the hypervisor's "reading the whole disk" for those disks.
func (s *storageSession) Warnings() []string {
	var out []string
	for _, w := range s.Session.Warnings() {
		replaced := false
		for _, d := range s.Session.Disks() {
			if _, ok := s.fromStorage[d.Key]; ok && d.ChangeWarning != "" && w == d.Key+": "+d.ChangeWarning {
				replaced = true
			}
		}
		if !replaced {
			out = append(out, w)
		}
	}
	return append(out, s.notes...)
}

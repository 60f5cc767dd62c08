package storagesnap

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Change tracking that survives power-off: what changed in a disk between
// two storage snapshots, from the storage itself. A dirty bitmap dies with
// its QEMU process (a crash, a host reboot); the kept snapshot of the
// previous run and the new one are still on the datastore, and the blocks
// nobody wrote between them are the very same device blocks in both. So a
// guest range is unchanged when both images map it to the same state
// (unallocated or zero in both, or data held by the same device blocks).
// Anything else, or anything the maps cannot vouch for, counts as
// changed: the result may be too large, never too small. An exec
// provider may answer from the array's own snapshot diff instead (its
// "changed" action, reportedDiff). The backup's
// self-check (internal/backup/changecheck.go) then samples the ranges
// called unchanged and reads the disk in full if one differs.

// changeGranule is the unit of comparison: the default qcow2 cluster.
const changeGranule = 64 << 10

// mapEntry is one range of `qemu-img map --output=json`.
type mapEntry struct {
	Start   int64  `json:"start"`
	Length  int64  `json:"length"`
	Depth   int    `json:"depth"`
	Present bool   `json:"present"`
	Zero    bool   `json:"zero"`
	Data    bool   `json:"data"`
	Offset  *int64 `json:"offset"`
}

// imageMap maps a disk image's guest ranges to the ranges of its file.
func imageMap(ctx context.Context, path, format string, size int64) ([]mapEntry, error) {
	switch format {
	case "raw", "":
		zero := int64(0)
		return []mapEntry{{Start: 0, Length: size, Present: true, Data: true, Offset: &zero}}, nil
	case "qcow2":
		// -U: the images are snapshots that a backup may be reading
		// through qemu-nbd at the same time.
		out, err := exec.CommandContext(ctx, "qemu-img", "map", "--output=json", "-U", "-f", "qcow2", path).Output()
		if err != nil {
			return nil, fmt.Errorf("qemu-img map %s: %w", path, exitDetail(err))
		}
		var m []mapEntry
		if err := json.Unmarshal(out, &m); err != nil {
			return nil, fmt.Errorf("qemu-img map %s: %w", path, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("change sets from storage snapshots need raw or qcow2 images, not %s", format)
}

func exitDetail(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}

// fileDiff says whether a range of the disk file holds the same bytes in
// both snapshots: at file offset ha in the older, hb in the newer.
type fileDiff interface {
	same(ha, hb, l int64) bool
}

// extentDiff compares the files' extent maps (FIEMAP): a range is the
// same when both map it to the same device blocks, which reflink clones
// and btrfs snapshots share until one side is written.
type extentDiff struct{ older, newer []physExtent }

func (d extentDiff) same(ha, hb, l int64) bool {
	return sameRuns(runs(d.older, ha, l), runs(d.newer, hb, l))
}

// reportedDiff is what an exec provider's "changed" action printed: the
// file ranges that may differ; everything else is the same at the same
// offset.
type reportedDiff []hypervisor.Extent

func (d reportedDiff) same(ha, hb, l int64) bool {
	if ha != hb {
		return false
	}
	i := sort.Search(len(d), func(i int) bool { return d[i].Offset+d[i].Length > hb })
	return i == len(d) || d[i].Offset >= hb+l
}

// fiemapDiff reads both files' extent maps.
func fiemapDiff(older, newer string) (fileDiff, error) {
	a, err := fileExtents(older)
	if err != nil {
		return nil, err
	}
	b, err := fileExtents(newer)
	if err != nil {
		return nil, err
	}
	return extentDiff{older: a, newer: b}, nil
}

// changedBetween returns the guest ranges of a disk that may differ
// between its image in an older snapshot and in a newer one, given how
// to tell whether their files' ranges differ.
func changedBetween(ctx context.Context, older, newer, format string, size int64, diff fileDiff) ([]hypervisor.Extent, error) {
	a, err := imageMap(ctx, older, format, size)
	if err != nil {
		return nil, err
	}
	b, err := imageMap(ctx, newer, format, size)
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Extent
	for off := int64(0); off < size; off += changeGranule {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(int64(changeGranule), size-off)
		if sameGuestRange(a, b, diff, off, n) {
			continue
		}
		if k := len(out); k > 0 && out[k-1].Offset+out[k-1].Length == off {
			out[k-1].Length += n
		} else {
			out = append(out, hypervisor.Extent{Offset: off, Length: n})
		}
	}
	return out, nil
}

// sameGuestRange reports whether [off, off+n) of the guest is certainly
// the same in both images.
func sameGuestRange(a, b []mapEntry, diff fileDiff, off, n int64) bool {
	for end := off + n; off < end; {
		ea, okA := entryAt(a, off)
		eb, okB := entryAt(b, off)
		if !okA || !okB {
			return false
		}
		l := min(ea.Start+ea.Length, eb.Start+eb.Length, end) - off
		sa, sb := state(ea), state(eb)
		switch {
		case sa == "unknown" || sb == "unknown" || sa != sb:
			return false
		case sa == "data":
			if !diff.same(*ea.Offset+off-ea.Start, *eb.Offset+off-eb.Start, l) {
				return false
			}
		}
		off += l
	}
	return true
}

// state is what a map entry says of its guest range: "zero" (reads as
// zeros: unallocated without a backing file, or a zero cluster), "data"
// at a known file offset, or "unknown" (a backing file's, or compressed).
func state(e mapEntry) string {
	switch {
	case e.Depth > 0:
		return "unknown"
	case !e.Present || (e.Zero && !e.Data):
		return "zero"
	case e.Data && e.Offset != nil:
		return "data"
	}
	return "unknown"
}

func entryAt(m []mapEntry, off int64) (mapEntry, bool) {
	i := sort.Search(len(m), func(i int) bool { return m[i].Start+m[i].Length > off })
	if i == len(m) || m[i].Start > off {
		return mapEntry{}, false
	}
	return m[i], true
}

// ChangedSince implements hypervisor.StorageChangeTracker.
func (s *snapshot) ChangedSince(ctx context.Context, jobID int64, vm hypervisor.VMRef, disk hypervisor.DiskInfo) ([]hypervisor.Extent, string, error) {
	rel, err := relPath(s.j.Root, disk.Path)
	if err != nil {
		return nil, "", err
	}
	base, err := keptHolding(s.stateDir(), s.j.Root, jobID, vm, disk.Path)
	if err != nil {
		return nil, "", err
	}
	bk, err := kindOf(&base)
	if err != nil {
		return nil, "", err
	}
	pctx, cancel := context.WithTimeout(ctx, base.timeout())
	oldDir, err := bk.present(pctx, &base)
	cancel()
	if err != nil {
		return nil, "", fmt.Errorf("presenting kept storage snapshot %s: %w", base.Label, err)
	}
	newDir, err := s.presented(ctx)
	if err != nil {
		return nil, "", err
	}
	older, newer := filepath.Join(oldDir, rel), filepath.Join(newDir, rel)
	var diff fileDiff
	if s.j.Kind == "exec" && s.j.Changes {
		ectx, cancel := context.WithTimeout(ctx, s.j.timeout())
		ranges, err := execChanges(ectx, &base, s.j, rel)
		cancel()
		if err != nil {
			return nil, "", fmt.Errorf("the provider's changed ranges of %s: %w", rel, err)
		}
		diff = reportedDiff(ranges)
	} else if diff, err = fiemapDiff(older, newer); err != nil {
		return nil, "", err
	}
	changed, err := changedBetween(ctx, older, newer, disk.Format, disk.Size, diff)
	return changed, base.Label, err
}

// keptHolding finds the kept snapshot of a datastore root that job jobID
// took with the VM's disk file in it.
func keptHolding(stateDir, root string, jobID int64, vm hypervisor.VMRef, path string) (journal, error) {
	js, err := keptJournals(stateDir)
	if err != nil {
		return journal{}, err
	}
	for _, e := range js {
		j := e.Value
		if j.JobID != jobID || j.Root != root {
			continue
		}
		for _, v := range j.VMs {
			if v.ID != vm.ID && (v.ID != "" || v.Name != vm.Name) {
				continue
			}
			for _, d := range v.Disks {
				if d.Path == path {
					return j, nil
				}
			}
		}
	}
	return journal{}, fmt.Errorf("no kept storage snapshot of job %d holds %s of %s: %w", jobID, path, vm.Name, hypervisor.ErrNotFound)
}

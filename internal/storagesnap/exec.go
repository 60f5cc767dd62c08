package storagesnap

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/hostexec"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// execKind drives a site's own program, the way array vendors' storage
// plug-ins are used. The contract (also in docs/07-storage-integration.md):
//
// coffer runs the entry's command with one more argument, the action, and
// these environment variables:
//
//		COFFER_ACTION     create, present, list or delete
//		COFFER_LABEL      the snapshot's name, "coffer-..." (not for list)
//		COFFER_DATASTORE  the datastore root the provider entry covers
//		COFFER_FILES      create only: the disk files of the batch, relative
//		                  to COFFER_DATASTORE, one per line
//
//	  - create: take one crash-consistent snapshot of the storage behind
//	    COFFER_DATASTORE and name it COFFER_LABEL. The VMs are held still
//	    until it exits, so it should take seconds.
//	  - present: make the snapshot readable and print on stdout the absolute
//	    directory in which it shows the files of COFFER_DATASTORE (the same
//	    relative paths).
//	  - list: print the labels of the snapshots it holds, one per line.
//	  - delete: stop presenting and delete the snapshot COFFER_LABEL; a
//	    snapshot that does not exist is success.
//	  - changed (optional, called only when the entry says changes: true):
//	    print the byte ranges of the disk file COFFER_FILE (relative to
//	    COFFER_DATASTORE) that may differ between the snapshot
//	    COFFER_BASE_LABEL (older, kept by an earlier run) and COFFER_LABEL,
//	    one "OFFSET LENGTH" per line, in decimal bytes of the file. Too
//	    much is allowed, too little is not: coffer reads only these ranges
//	    of the disk in an incremental whose dirty bitmaps were lost (and
//	    samples the rest to check; see changes.go). Arrays call this a
//	    snapshot diff (Ceph's rbd diff --from-snap, NetApp SnapDiff).
//
// For a vSphere datastore, COFFER_DATASTORE is the entry as written
// ("[name]"), COFFER_FILES are the disks' descriptors as paths on the
// datastore, and present prints the directory that shows the datastore's
// files (a filer's snapshot directory, a snapshot LUN's VMFS mounted
// read-only): coffer reads each descriptor and its extents there.
//
// Exit status 0 is success; anything else fails the step with the last
// lines of stderr. Every call has the entry's timeout; past it the whole
// process group is killed. A snapshot is deleted on every path: when
// create fails or times out (it may have created it half-way), when its
// last VM is read, and at the next start for one a killed coffer left
// (journaled before create runs). After delete, coffer runs list and
// fails the deletion if the label is still there.
type execKind struct{}

func checkExec(p policy.StorageProvider) error {
	if len(p.Command) == 0 {
		return errors.New("the exec provider has no command")
	}
	path, err := exec.LookPath(p.Command[0])
	if err != nil {
		return fmt.Errorf("the exec provider's command %s: %w", p.Command[0], err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		return fmt.Errorf("the exec provider's command %s is not executable", path)
	}
	return nil
}

func (execKind) create(ctx context.Context, j *journal, disks []hypervisor.DiskInfo) error {
	var files []string
	for _, d := range disks {
		rel, err := relPath(j.Root, d.Path)
		if err != nil {
			return err
		}
		files = append(files, rel)
	}
	_, err := runExec(ctx, j, "create", "COFFER_FILES="+strings.Join(files, "\n"))
	return err
}

func (execKind) present(ctx context.Context, j *journal) (string, error) {
	out, err := runExec(ctx, j, "present")
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(out)
	if i := strings.LastIndexByte(dir, '\n'); i >= 0 {
		dir = strings.TrimSpace(dir[i+1:])
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("present printed %q, not an absolute directory", dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("present printed %s, which is not a directory", dir)
	}
	return dir, nil
}

func (execKind) remove(ctx context.Context, j *journal) error {
	if _, err := runExec(ctx, j, "delete"); err != nil {
		return err
	}
	out, err := runExec(ctx, j, "list")
	if err != nil {
		return fmt.Errorf("checking the deletion: %w", err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == j.Label {
			return fmt.Errorf("delete succeeded but list still shows %s", j.Label)
		}
	}
	return nil
}

// execChanges asks the provider for the ranges of a disk file that may
// differ between two of its snapshots (the contract's "changed" action).
func execChanges(ctx context.Context, base, newer *journal, rel string) ([]hypervisor.Extent, error) {
	out, err := runExec(ctx, newer, "changed", "COFFER_BASE_LABEL="+base.Label, "COFFER_FILE="+rel)
	if err != nil {
		return nil, err
	}
	return parseRanges(out)
}

// parseRanges reads "OFFSET LENGTH" lines into sorted, merged extents.
func parseRanges(out string) ([]hypervisor.Extent, error) {
	var ext []hypervisor.Extent
	for i, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		var off, n int64
		var err error
		if len(f) == 2 {
			if off, err = strconv.ParseInt(f[0], 10, 64); err == nil {
				n, err = strconv.ParseInt(f[1], 10, 64)
			}
		}
		if len(f) != 2 || err != nil || off < 0 || n <= 0 || off > math.MaxInt64-n {
			return nil, fmt.Errorf("changed printed %q on line %d, not \"OFFSET LENGTH\" in bytes", l, i+1)
		}
		ext = append(ext, hypervisor.Extent{Offset: off, Length: n})
	}
	return mergeExtents(ext), nil
}

// mergeExtents sorts extents and merges those that overlap or touch.
func mergeExtents(ext []hypervisor.Extent) []hypervisor.Extent {
	sort.Slice(ext, func(a, b int) bool { return ext[a].Offset < ext[b].Offset })
	var out []hypervisor.Extent
	for _, e := range ext {
		if k := len(out); k > 0 && e.Offset <= out[k-1].Offset+out[k-1].Length {
			out[k-1].Length = max(out[k-1].Length, e.Offset+e.Length-out[k-1].Offset)
			continue
		}
		out = append(out, e)
	}
	return out
}

// runExec runs one action in its own process group, killed whole when
// ctx ends (a shell script's children included).
func runExec(ctx context.Context, j *journal, action string, env ...string) (string, error) {
	if len(j.Command) == 0 {
		return "", errors.New("the exec provider has no command")
	}
	env = append([]string{"COFFER_ACTION=" + action, "COFFER_DATASTORE=" + j.Root}, env...)
	if action != "list" {
		env = append(env, "COFFER_LABEL="+j.Label)
	}
	return hostexec.Run(ctx, j.Command[0]+" "+action, append(append([]string{}, j.Command...), action), env)
}

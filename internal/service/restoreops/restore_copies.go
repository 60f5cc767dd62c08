package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/restore"
)

// maxCopies bounds restore --copies: test copies for a lab, not a way to
// fill a filesystem by a typo.
const maxCopies = 64

// copyTargets names the extra copies of each restored disk (restore
// --copies N): copy k of web.raw is web-copyK.raw beside it. They are
// checked before anything is restored, as the targets are: an existing
// copy is refused without --overwrite (--resume re-makes them, since they
// are made from the restored disk), and a block device target takes one
// copy only.
func copyTargets(in restoreDisks, targets []string) ([][]string, error) {
	if in.Copies <= 1 {
		return make([][]string, len(targets)), nil
	}
	if in.Copies > maxCopies {
		return nil, service.Invalidf("--copies %d: at most %d copies of a disk", in.Copies, maxCopies)
	}
	out := make([][]string, len(targets))
	for i, target := range targets {
		if fi, err := os.Stat(target); err == nil && !fi.Mode().IsRegular() {
			return nil, service.Invalidf("--copies: the target %s is not a file (copies are files made beside a file target)", target)
		}
		ext := filepath.Ext(target)
		stem := strings.TrimSuffix(target, ext)
		for k := 2; k <= in.Copies; k++ {
			c := stem + "-copy" + strconv.Itoa(k) + ext
			if !in.Resume {
				if err := restore.CheckTarget(c, in.Overwrite); err != nil {
					return nil, fmt.Errorf("copy %d of %s: %w", k, target, err)
				}
			}
			out[i] = append(out[i], c)
		}
	}
	return out, nil
}

// makeCopies makes the extra copies of one restored disk from the disk
// itself, not from the repository: the filesystem clones it where it can
// (VAAI's full copy), and it is copied extent by extent where it cannot.
func (s Ops) makeCopies(ctx context.Context, t service.Job, disk, target string, copies []string, o offload.CopyOptions) ([]api.DiskCopy, error) {
	out := []api.DiskCopy{}
	for _, c := range copies {
		st, err := offload.CopyFile(ctx, target, c, o)
		if errors.Is(err, offload.ErrTargetExists) { // made since copyTargets looked
			err = fmt.Errorf("%w: %s (use --overwrite to replace it)", restore.ErrTargetExists, c)
		}
		if errors.Is(err, syscall.ENOSPC) { // the exit code and advice of a full restore target
			err = fmt.Errorf("%w: %w", restore.ErrTargetFull, err)
		}
		if err != nil {
			return out, err
		}
		s.reportCopy(t, disk, c, st)
		out = append(out, api.DiskCopy{Target: c, Method: string(st.Method), DataBytes: st.DataBytes})
	}
	return out, nil
}

// reportCopy says in the task's log and the metrics how a copy was made.
func (s Ops) reportCopy(t service.Job, disk, target string, st offload.CopyStats) {
	how := map[offload.Method]string{
		offload.Cloned:       "cloned by the filesystem (shared extents, nothing through the host)",
		offload.KernelCopied: "copied by the kernel (copy_file_range: the filesystem cannot clone it)",
		offload.Copied:       "copied through coffer (--no-offload, another filesystem, or one that cannot copy by itself)",
	}[st.Method]
	t.Log(slog.LevelInfo, fmt.Sprintf("disk %s: copy %s: %s of data %s", disk, target, config.HumanBytes(st.DataBytes), how),
		"primitive", "copy", "method", string(st.Method), "bytes", st.DataBytes)
	if m := s.Config.Metrics; m != nil {
		path := "fallback"
		if st.Method.Offloaded() {
			path = "offloaded"
		}
		m.AddOffload("copy", path, st.DataBytes)
	}
}

package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// prune merges the oldest points away until keep remain. Merging point A
// (the chain's base) into B (backed by A) is crash-safe by order:
//
//  1. the record drops A and notes the merge (A is no longer a point);
//  2. `qemu-img commit -d B` copies B's clusters into A. Reading through B
//     gives B's content at every instant of the copy (B's own clusters
//     win over A's), so B and every later point stay intact; a kill
//     repeats the copy, which is idempotent, and the clusters the killed
//     copy leaked in A are freed (`qemu-img check -r leaks`);
//  3. A's file is renamed over B's: the name B's successor is backed by
//     now holds a standalone image with B's content, atomically;
//  4. the record clears the merge.
//
// A run that finds a merge noted finishes it (recoverStandby).
func prune(ctx context.Context, dir string, st *State, keep int, hook func(string)) ([]Point, error) {
	var pruned []Point
	for len(st.Points) > keep {
		from := st.Points[0]
		st.Points = slices.Clone(st.Points[1:])
		st.Merge = &Merge{From: from, Into: st.Points[0]}
		if err := saveState(dir, st); err != nil {
			return pruned, err
		}
		hook("merge-noted")
		if err := finishMerge(ctx, dir, st, false, hook); err != nil {
			return pruned, err
		}
		pruned = append(pruned, from)
	}
	return pruned, nil
}

// finishMerge carries out the merge the record notes, or completes it
// (repeated: a run that was killed or failed had begun it).
func finishMerge(ctx context.Context, dir string, st *State, repeated bool, hook func(string)) error {
	m := st.Merge
	for _, a := range m.From.Disks {
		b := m.Into.Disk(a.Key)
		if err := mergeDisk(ctx, a, b, repeated, hook); err != nil {
			return fmt.Errorf("merge point %d of disk %s into point %d: %w", m.From.Seq, a.Key, m.Into.Seq, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	st.Merge = nil
	return saveState(dir, st)
}

// mergeDisk merges overlay a into b (b nil: the disk is gone from the
// next point, and a is simply deleted); repeated, it first frees what an
// earlier, interrupted commit leaked.
func mergeDisk(ctx context.Context, a Disk, b *Disk, repeated bool, hook func(string)) error {
	if _, err := os.Stat(a.File); errors.Is(err, fs.ErrNotExist) {
		return nil // renamed over b already: the merge of this disk is done
	}
	if b == nil || !backedBy(ctx, b.File, a.File) {
		return removeFile(a.File)
	}
	if err := os.Chmod(a.File, 0o644); err != nil {
		return err
	}
	out, err := qemuCommand(ctx, "qemu-img", "commit", "-q", "-d", "-f", "qcow2", b.File).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img commit %s: %v: %s", b.File, err, strings.TrimSpace(string(out)))
	}
	// A commit killed midway leaves clusters in a that it allocated but
	// never referenced. The repeated commit does not free them, and a
	// would carry them into b's name: harmless to the data, but `qemu-img
	// check` then fails the point. Only leaks are repaired (-r leaks):
	// anything worse fails the merge, which the next run tries again. A
	// first commit leaks nothing, and is not checked.
	if repeated {
		out, err := qemuCommand(ctx, "qemu-img", "check", "-q", "-r", "leaks", "-f", "qcow2", a.File).CombinedOutput()
		if err != nil {
			return fmt.Errorf("qemu-img check -r leaks %s: %v: %s", a.File, err, strings.TrimSpace(string(out)))
		}
	}
	if err := syncFile(a.File); err != nil {
		return err
	}
	if err := os.Chmod(a.File, 0o444); err != nil {
		return err
	}
	hook("merge-committed")
	if err := os.Rename(a.File, b.File); err != nil {
		return err
	}
	hook("merge-renamed")
	return nil
}

// backedBy reports whether overlay file's backing file is base.
func backedBy(ctx context.Context, file, base string) bool {
	out, err := qemuCommand(ctx, "qemu-img", "info", "-U", "--output=json", file).Output()
	if err != nil {
		return false
	}
	return strings.Contains(string(out), `"backing-filename": "`+filepath.Base(base)+`"`)
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// recoverStandby brings the directory back to what the record says after
// a killed run: a noted merge is finished, and the files the record does
// not name (a killed run's overlays, a temporary record) are removed, as
// is a qemu-nbd a run left waiting for it.
func recoverStandby(ctx context.Context, dir string, st *State, log *slog.Logger) error {
	endLeftoverServer(dir)
	files, err := filepath.Glob(filepath.Join(dir, "disk-*.qcow2"))
	if err != nil {
		return err
	}
	if err := awaitQuiet(ctx, files, 30*time.Second); err != nil {
		return err
	}
	if st.Merge != nil {
		log.Info("finishing an interrupted merge of replica points", "from", st.Merge.From.Seq, "into", st.Merge.Into.Seq)
		if err := finishMerge(ctx, dir, st, true, func(string) {}); err != nil {
			return err
		}
	}
	known := map[string]bool{}
	for _, f := range chainFiles(st) {
		known[filepath.Base(f)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		leftover := n == stateName+".tmp" || n == definitionName+".tmp" || strings.HasPrefix(n, "disk-") && strings.HasSuffix(n, ".qcow2") && !known[n]
		if !leftover {
			continue
		}
		log.Info("removing a killed replication's leftover", "file", n)
		if err := removeFile(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

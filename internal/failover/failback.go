package failover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/replica"
)

// FailbackResult is what a failback moved.
type FailbackResult struct {
	VM string `json:"vm"`
	// Mode is "changed-at-dr" (a planned failover's: the clusters the DR
	// overlay holds), "compare" (an unplanned one's: every block that
	// differs between the DR VM's disk and the original's) or
	// "new-location" (FailbackTo: every block that is not zero, onto new
	// images).
	Mode string `json:"mode"`
	// BytesRead is read from the DR disks; BytesWritten written onto the
	// original disks.
	BytesRead    int64         `json:"bytes_read"`
	BytesWritten int64         `json:"bytes_written"`
	Extents      int           `json:"extents"`
	Duration     time.Duration `json:"duration_ns"`
	// Disks are the new disk files of a failback to a new location, by
	// disk key.
	Disks map[string]string `json:"disks,omitempty"`
}

// copyUnit is the piece a failback reads and writes at once.
const copyUnit = 1 << 20

// Modes of a failback (FailbackResult.Mode).
const (
	modeChanged     = "changed-at-dr"
	modeCompare     = "compare"
	modeNewLocation = "new-location"
)

// Failback writes what changed at the DR site back onto the original VM's
// disks (targets: disk key -> image file, raw or qcow2, of the original
// VM, which must not run), then clears the standby's failed-over mark
// and removes the DR VM's overlays (a standby domain's active files too,
// so that it cannot start by accident again): replication may follow the
// VM again.
// The DR VM is stopped first. After a planned failover the original disks
// equal the failover point, so only what the DR overlay holds is written;
// after an unplanned one the original may have moved on after the point
// (or be damaged), so every block is compared and the differing ones are
// written. A failback killed at any instant leaves the mark set and is
// done again in full by the next one (the copy is idempotent).
func Failback(ctx context.Context, vm VM, targets map[string]string, log *slog.Logger) (*FailbackResult, error) {
	return failback(ctx, vm, log, func(fo *replica.FailedOver) (map[string]string, string, error) {
		if fo.Planned {
			return targets, modeChanged, nil
		}
		return targets, modeCompare, nil
	})
}

// FailbackTo is a failback to a new location: the DR VM's disks are
// written whole (what they hold that is not zero) as new qcow2 files in
// dir, disk-KEY.qcow2 per disk, and the original VM's disks are not
// touched (an original that is gone, or kept as it was for an
// investigation). Each file is written as disk-KEY.qcow2.part and renamed
// once complete, before the failed-over mark is cleared: a failback
// killed midway leaves the mark and no file of the final name, and the
// next one writes the parts again. A final name that exists already is
// refused, never overwritten.
func FailbackTo(ctx context.Context, vm VM, dir string, log *slog.Logger) (*FailbackResult, error) {
	var final map[string]string
	res, err := failback(ctx, vm, log, func(fo *replica.FailedOver) (map[string]string, string, error) {
		parts := map[string]string{}
		final = map[string]string{}
		for k := range fo.Overlays {
			f := filepath.Join(dir, "disk-"+fileName(k)+".qcow2")
			if _, err := os.Lstat(f); err == nil {
				return nil, "", fmt.Errorf("failback of %s to %s: %s exists already", vm.Name, dir, f)
			}
			final[k], parts[k] = f, f+".part"
		}
		return parts, modeNewLocation, os.MkdirAll(dir, 0o700)
	})
	if res != nil && err == nil {
		res.Disks = final
	}
	return res, err
}

// failback stops the DR VM, copies its disks onto the targets that
// plan gives, and clears the failed-over mark.
func failback(ctx context.Context, vm VM, log *slog.Logger, plan func(*replica.FailedOver) (map[string]string, string, error)) (*FailbackResult, error) {
	began := time.Now()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := StopFailedOver(ctx, vm, 30*time.Second); err != nil {
		return nil, err
	}
	lock, err := replica.LockRun(vm.Dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lock.Close() }() // the record is saved before
	st, err := replica.LoadState(vm.Dir)
	if err != nil {
		return nil, err
	}
	fo := st.FailedOver
	if fo == nil {
		return nil, fmt.Errorf("the standby of %s is not failed over: nothing to fail back", vm.Name)
	}
	targets, mode, err := plan(fo)
	if err != nil {
		return nil, err
	}
	res := &FailbackResult{VM: vm.Name, Mode: mode}
	keys := make([]string, 0, len(fo.Overlays))
	for k := range fo.Overlays {
		if targets[k] == "" {
			return nil, fmt.Errorf("failback of %s: no original disk given for disk %s", vm.Name, k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := failbackDisk(ctx, fo.Overlays[k], targets[k], mode, res); err != nil {
			return res, fmt.Errorf("failback of %s, disk %s: %w", vm.Name, k, err)
		}
		log.Info("failback: disk written back", "vm", vm.Name, "disk", k, "mode", res.Mode, "bytes_written", res.BytesWritten)
	}
	if mode == modeNewLocation {
		for _, k := range keys {
			if err := os.Rename(targets[k], strings.TrimSuffix(targets[k], ".part")); err != nil {
				return res, err
			}
		}
	}
	st.FailedOver = nil
	if err := replica.SaveState(vm.Dir, st); err != nil {
		return res, err
	}
	res.Duration = time.Since(began)
	return res, errors.Join(os.RemoveAll(fo.RunDir), removeOverlays(fo))
}

// failbackDisk copies one disk: the DR overlay's own clusters
// (modeChanged), every block that differs (modeCompare), or every block
// that is not zero onto a new image (modeNewLocation).
func failbackDisk(ctx context.Context, overlay, target, mode string, res *FailbackResult) error {
	src, err := serve(ctx, overlay, true)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close(context.WithoutCancel(ctx), false) }() // read only
	if mode == modeNewLocation {
		if err := createImage(ctx, target, src.Size()); err != nil {
			return err
		}
	}
	changedOnly := mode == modeChanged
	dst, err := serve(ctx, target, false)
	if err != nil {
		return err
	}
	if dst.Size() < src.Size() {
		dst.kill()
		return fmt.Errorf("the original disk %s (%d bytes) is smaller than the DR disk (%d bytes)", target, dst.Size(), src.Size())
	}
	type span struct{ off, n int64 }
	var spans []span
	if changedOnly {
		ext, err := src.Map(ctx, allocationDepth)
		if err != nil {
			dst.kill()
			return err
		}
		for _, e := range ext {
			if e.Flags == 1 { // held by the overlay itself: written at the DR site
				spans = append(spans, span{e.Offset, e.Length})
			}
		}
	} else {
		spans = []span{{0, src.Size()}}
	}
	a, b := make([]byte, copyUnit), make([]byte, copyUnit)
	for _, s := range spans {
		res.Extents++
		for off := s.off; off < s.off+s.n; off += copyUnit {
			n := min(int64(copyUnit), s.off+s.n-off)
			if _, err := src.ReadAtContext(ctx, a[:n], off); err != nil {
				dst.kill()
				return err
			}
			res.BytesRead += n
			if mode == modeNewLocation && isZero(a[:n]) {
				continue // a new image reads zeros there already
			}
			if mode == modeCompare {
				if _, err := dst.ReadAtContext(ctx, b[:n], off); err != nil {
					dst.kill()
					return err
				}
				if bytes.Equal(a[:n], b[:n]) {
					continue
				}
			}
			if _, err := dst.WriteAtContext(ctx, a[:n], off, false); err != nil {
				dst.kill()
				return err
			}
			res.BytesWritten += n
		}
	}
	return dst.Close(ctx, true)
}

// createImage makes a new, empty qcow2 image of size bytes at file (a
// leftover part of a killed failback is made again).
func createImage(ctx context.Context, file string, size int64) error {
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", file, strconv.FormatInt(size, 10)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create %s: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

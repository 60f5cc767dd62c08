package failover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/replica"
)

// FailbackResult is what a failback moved.
type FailbackResult struct {
	VM string `json:"vm"`
	// Mode is "changed-at-dr" (a planned failover's: the clusters the DR
	// overlay holds) or "compare" (an unplanned one's: every block that
	// differs between the DR VM's disk and the original's).
	Mode string `json:"mode"`
	// BytesRead is read from the DR disks; BytesWritten written onto the
	// original disks.
	BytesRead    int64         `json:"bytes_read"`
	BytesWritten int64         `json:"bytes_written"`
	Extents      int           `json:"extents"`
	Duration     time.Duration `json:"duration_ns"`
}

// copyUnit is the piece a failback reads and writes at once.
const copyUnit = 1 << 20

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
	res := &FailbackResult{VM: vm.Name, Mode: "compare"}
	if fo.Planned {
		res.Mode = "changed-at-dr"
	}
	keys := make([]string, 0, len(fo.Overlays))
	for k := range fo.Overlays {
		if targets[k] == "" {
			return nil, fmt.Errorf("failback of %s: no original disk given for disk %s", vm.Name, k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := failbackDisk(ctx, fo.Overlays[k], targets[k], fo.Planned, res); err != nil {
			return res, fmt.Errorf("failback of %s, disk %s: %w", vm.Name, k, err)
		}
		log.Info("failback: disk written back", "vm", vm.Name, "disk", k, "mode", res.Mode, "bytes_written", res.BytesWritten)
	}
	st.FailedOver = nil
	if err := replica.SaveState(vm.Dir, st); err != nil {
		return res, err
	}
	res.Duration = time.Since(began)
	return res, errors.Join(os.RemoveAll(fo.RunDir), removeOverlays(fo))
}

// failbackDisk copies one disk: the DR overlay's own clusters (changedOnly)
// or every block that differs.
func failbackDisk(ctx context.Context, overlay, target string, changedOnly bool, res *FailbackResult) error {
	src, err := serve(ctx, overlay, true)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close(context.WithoutCancel(ctx), false) }() // read only
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
			if !changedOnly {
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

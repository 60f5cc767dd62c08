package ranged

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Device is a Target over an open block device (or file).
type Device struct{ F *os.File }

func (d Device) WriteAt(p []byte, off int64) (int, error) { return d.F.WriteAt(p, off) }

func (d Device) Sync() error { return d.F.Sync() }

// ZeroRange asks the device to zero the range (WRITE SAME or UNMAP below,
// no data sent); a device that cannot is sent zeros.
func (d Device) ZeroRange(off, n int64) error {
	if unix.Fallocate(int(d.F.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n) == nil {
		return nil
	}
	zero := make([]byte, min(n, writeBuffer))
	for done := int64(0); done < n; {
		k := min(n-done, int64(len(zero)))
		if _, err := d.F.WriteAt(zero[:k], off+done); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// IsBreak: an error a later attempt may not meet (the device, or a
// reconfiguration that timed out), as opposed to one in the data or the
// request.
func IsBreak(err error) bool {
	return errors.Is(err, hypervisor.ErrTransient) || errors.Is(err, syscall.EIO) ||
		errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.ENODEV)
}

// Retry runs attempt until it succeeds, fails other than by a break, or
// the policy's attempts are spent, waiting the policy's backoff between
// attempts. Each attempt resumes from the journal, so the Stats add up:
// Resumed is what the journal had before the first.
func Retry(ctx context.Context, policy hypervisor.RetryPolicy, log *slog.Logger, what string, attempt func() (Stats, error)) (Stats, error) {
	var total Stats
	for n := 1; ; n++ {
		st, err := attempt()
		total.Written += st.Written
		total.Zeroed += st.Zeroed
		total.Pieces = st.Pieces
		if n == 1 {
			total.Resumed = st.Resumed
		}
		if err == nil || !IsBreak(err) || n >= policy.Attempts || ctx.Err() != nil {
			return total, err
		}
		wait := policy.Wait(n)
		log.Warn("restore of a disk broke; resuming from its journal", "disk", what, "attempt", n, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return total, errors.Join(err, ctx.Err())
		}
	}
}

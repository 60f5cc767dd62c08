package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The standby's disks are guarded the way QEMU guards its own images: with
// open file description (OFD) locks on the bytes QEMU's file driver
// reserves (block/file-posix.c). Byte 100+i stands for "holds permission
// i", byte 200+i for "does not let others take permission i"; permission 1
// is write. A read lock on byte 201 is therefore what a reader that
// forbids writers holds: a QEMU (a started VM, qemu-img commit, qemu-io)
// asking to write the file fails with "Failed to get "write" lock", while
// readers (qemu-img compare, info) still open it.
const (
	qemuSharedBase = 200
	qemuPermWrite  = 1
)

// lockName is the standby's lock file. Its bytes are three locks, held
// as OFD locks (released on Close, or when the process dies: the kernel
// drops them with the last descriptor, kill -9 included):
//
//   - byte 0, the record's: whoever changes the standby's record holds it
//     exclusively, a replication run, a failover or a failback, one at a
//     time;
//   - byte 1, the points': a replication run holds it exclusively (it
//     writes a new point and merges the oldest away), a test failover
//     shared for as long as its VMs run on overlays of a point, so that
//     no run changes the files they read;
//   - byte 2, the test's: a test failover holds it exclusively, one test
//     of a standby at a time.
//
// A failover or failback does not touch the points, so neither waits on a
// test: a real failover is never held up by a rehearsal. coffer's
// earlier versions locked the whole file for a run, which still excludes
// all of these.
const lockName = "replica.lock"

const (
	recordByte = 0
	pointsByte = 1
	testByte   = 2
)

// ErrBusy reports a standby another run holds.
var ErrBusy = errors.New("another replication, failover or failback of this standby is running")

// ErrTesting refuses a replication while a test failover reads the
// standby's points; the next run (the schedule's) replicates.
var ErrTesting = errors.New("a test failover runs on this standby's points: replicate once it has ended (coffer failover runs PLAN shows it)")

// ErrTestRunning refuses a second test failover of a standby.
var ErrTestRunning = errors.New("a test failover of this standby is already running")

// ErrReplicating refuses a test failover while a replication changes the
// standby's points.
var ErrReplicating = errors.New("a replication of this standby is writing its points: test once it has ended")

// runLock holds the standby's locks that one caller took.
type runLock struct{ f *os.File }

// lockRun takes the record's lock, and the points' too when points is
// set (a replication run).
func lockRun(dir string, points bool) (*runLock, error) {
	l, err := openLock(dir)
	if err != nil {
		return nil, err
	}
	if err := l.take(dir, recordByte, unix.F_WRLCK, ErrBusy); err != nil {
		return nil, err
	}
	if points {
		if err := l.take(dir, pointsByte, unix.F_WRLCK, ErrTesting); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// lockTest takes a test failover's locks: its own, then the points'
// shared.
func lockTest(dir string) (*runLock, error) {
	l, err := openLock(dir)
	if err != nil {
		return nil, err
	}
	if err := l.take(dir, testByte, unix.F_WRLCK, ErrTestRunning); err != nil {
		return nil, err
	}
	if err := l.take(dir, pointsByte, unix.F_RDLCK, ErrReplicating); err != nil {
		return nil, err
	}
	return l, nil
}

func openLock(dir string) (*runLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &runLock{f: f}, nil
}

// take locks byte at as typ, or closes the file (what was taken goes
// with it) and reports busy, which names who holds that byte: the locks
// are taken in the order above, so only one kind of holder can be in the
// way of each.
func (l *runLock) take(dir string, at int64, typ int16, busy error) error {
	err := lockByte(l.f, at, typ)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		err = fmt.Errorf("%s: %w", dir, busy)
	} else {
		err = fmt.Errorf("lock %s: %w", dir, err)
	}
	_ = l.f.Close() // the lock's error is the one to report
	return err
}

func (l *runLock) Close() error { return l.f.Close() }

// writeGuard keeps QEMU from opening a set of files for writing while it is
// held (see the constants above).
type writeGuard struct{ files []*os.File }

// guardFiles takes QEMU's "no other writer" lock on each path. It fails
// when a writer has the file open already.
func guardFiles(paths []string) (*writeGuard, error) {
	g := &writeGuard{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			_ = g.Close()
			return nil, err
		}
		g.files = append(g.files, f)
		if err := lockByte(f, qemuSharedBase+qemuPermWrite, unix.F_RDLCK); err != nil {
			_ = g.Close()
			return nil, fmt.Errorf("guard %s against writers: %w", p, err)
		}
		if writer, err := lockedRange(f, 100+qemuPermWrite, 1); err != nil || writer {
			_ = g.Close()
			if err == nil {
				err = fmt.Errorf("%s is open for writing by another process", p)
			}
			return nil, err
		}
	}
	return g, nil
}

// Close releases the guard.
func (g *writeGuard) Close() error {
	var first error
	for _, f := range g.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	g.files = nil
	return first
}

func lockByte(f *os.File, at int64, typ int16) error {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: at, Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

// awaitQuiet waits until no QEMU process (a killed run's qemu-img commit or
// qemu-nbd, which outlive coffer by an instant) holds any of QEMU's lock
// bytes on the files in paths, so that recovery and the next run do not
// trip over a process that is still exiting. It fails after timeout: a
// process that holds a standby's file for long is a killed test
// failover's VM (its lock went with its process, its QEMU did not), or
// not one of coffer's (someone started the standby outside failover).
func awaitQuiet(ctx context.Context, paths []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, p := range paths {
		if err := awaitFile(ctx, p, deadline); err != nil {
			return err
		}
	}
	return nil
}

func awaitFile(ctx context.Context, path string, deadline time.Time) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read only
	for {
		// QEMU takes read locks on bytes 100-299; a test for a write
		// lock over them sees any holder, without taking anything.
		held, err := lockedRange(f, 100, 200)
		if err != nil || !held {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is still open in another QEMU process: a VM of a killed test failover, which the next "+
				"`coffer server` or `coffer worker` start, or the next test failover, stops; else the standby was started outside failover", path)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // the exiting process's last instant
		}
	}
}

func lockedRange(f *os.File, at, n int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: at, Len: n}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

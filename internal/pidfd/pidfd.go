// Package pidfd waits for and ends processes that are not coffer's
// children, through a Linux pidfd: a daemonised qemu-nbd, which reparents
// itself away from coffer, has no exec.Cmd to Wait on, and its PID alone
// could be reused by another process once it exits.
package pidfd

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// Wait blocks until the process of fd has exited (its pidfd turns
// readable), then closes fd. When ctx ends first it kills the process
// and returns ctx's error; fd is closed then too. A negative fd (no
// process) returns at once.
func Wait(ctx context.Context, fd int) error {
	if fd < 0 {
		return nil
	}
	defer func() { _ = unix.Close(fd) }()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 1000) // wakes each second to see ctx
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	return ctx.Err()
}

// Kill kills the process of fd and waits until it has exited; fd is
// closed. A negative fd does nothing.
func Kill(fd int) {
	if fd < 0 {
		return
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	_ = Wait(context.Background(), fd)
}

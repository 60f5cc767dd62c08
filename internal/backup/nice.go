package backup

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Production protection on the hypervisor host. coffer's QMP and libvirt
// connectors run on the host beside the VMs they protect, so the backup's
// CPU work (reading, hashing, compression, encryption) competes with the
// guests' own: on a busy host it is CPU, not storage, that makes a
// guest's I/O wait during a backup (docs/benchmarks-qemu.md). The kernel
// weighs threads by niceness only while they compete, as Storage I/O
// Control weighs shares only while a datastore is congested: at niceness
// 10 a pipeline thread gets about a tenth of a core a guest's thread
// wants, and all of an idle one.
//
// Linux keeps a niceness per thread (setpriority with a thread ID), and
// Go has no API for it (hence this file): each pipeline goroutine locks
// an OS thread of its own, lowers that thread's priority, and puts it
// back before it ends, so that the lowered priority never reaches the
// rest of the process (the API server, the scheduler, other tasks).
// Where the process may not raise a priority again (no CAP_SYS_NICE,
// RLIMIT_NICE 0), the thread stays locked and the runtime ends it with
// the goroutine (runtime.LockOSThread).

// lowerThreadPriority locks the calling goroutine to its OS thread and
// runs that thread at niceness nice, unless it already runs lower. The
// goroutine calls restore before it ends.
func lowerThreadPriority(nice int) (restore func(), err error) {
	runtime.LockOSThread()
	// getpriority(2) returns 20 minus the niceness of the calling thread.
	p, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("read the CPU priority: %w", err)
	}
	was := 20 - p
	if was >= nice {
		return runtime.UnlockOSThread, nil
	}
	tid := unix.Gettid()
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("lower the CPU priority to niceness %d: %w", nice, err)
	}
	return func() {
		if unix.Setpriority(unix.PRIO_PROCESS, tid, was) == nil {
			runtime.UnlockOSThread()
		}
	}, nil
}

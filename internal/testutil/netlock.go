package testutil

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// LockNetwork keeps, until t ends, the tests that change this machine's
// network interfaces (NetLab's bridges and veths) apart from those such a
// change disturbs (Chromium aborts a page load with ERR_NETWORK_CHANGED
// when an interface comes or goes), across the test binaries that go test
// runs at once: an exclusive lock on one file of the machine's temporary
// directory, held while any test of this process asks for it (a test
// with two browsers asks twice).
func LockNetwork(t testing.TB) {
	t.Helper()
	if err := netLock.acquire(); err != nil {
		t.Fatalf("network lock: %v", err)
	}
	t.Cleanup(netLock.release)
}

// netLock is this process's hold of the machine-wide lock: the first
// acquire takes it, the last release gives it back.
var netLock processLock

type processLock struct {
	mu      sync.Mutex
	holders int
	f       *os.File
}

func (l *processLock) acquire() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders > 0 {
		l.holders++
		return nil
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "coffer-tests-network.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return err
	}
	l.f, l.holders = f, 1
	return nil
}

func (l *processLock) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders--; l.holders == 0 {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}

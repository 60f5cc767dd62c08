package testutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// LockNetwork keeps, until t ends, the tests that change this machine's
// network interfaces (NetLab's bridges and veths) apart from those such a
// change disturbs (Chromium aborts a page load with ERR_NETWORK_CHANGED
// when an interface comes or goes), across the test binaries that go test
// runs at once: an exclusive lock on one file of the machine's temporary
// directory.
func LockNetwork(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "coffer-tests-network.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("network lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		t.Fatalf("network lock: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
}

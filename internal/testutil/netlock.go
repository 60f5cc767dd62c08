package testutil

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// LockNetwork keeps, until t ends, this machine's network interfaces as
// they are, for a test that a change disturbs (Chromium aborts a page
// load with ERR_NETWORK_CHANGED when an interface comes or goes), across
// the test binaries that go test runs at once. Such tests share the lock
// (a shared lock on one file of the machine's temporary directory, held
// while any test of this process asks for it: a test with two browsers
// asks twice); NetLab takes it exclusively while it makes or removes its
// interfaces, and for a lab's whole life once it holds the network to
// cut links (NetLab.HoldNetwork).
func LockNetwork(t testing.TB) {
	t.Helper()
	if err := steadyNetwork.acquire(); err != nil {
		t.Fatalf("network lock: %v", err)
	}
	t.Cleanup(steadyNetwork.release)
}

// This process's holds of the machine-wide locks: the first acquire of
// one takes it, the last release gives it back.
//
// The network's lock is taken through a turnstile, a second file locked
// exclusively while one waits for the first: a lab waiting to change
// interfaces lets the browsers running end, and no new one start.
// Otherwise the next browser of a package of browser tests could take
// the shared lock before the lab ever got it.
var (
	// steadyNetwork: the tests that need the interfaces to stay as they are.
	steadyNetwork = processLock{name: "coffer-tests-network.lock", how: syscall.LOCK_SH, turnstile: "coffer-tests-network-turn.lock"}
	// changingNetwork: a lab that changes interfaces (the same file).
	changingNetwork = processLock{name: "coffer-tests-network.lock", how: syscall.LOCK_EX, turnstile: "coffer-tests-network-turn.lock"}
	// netLabs: one lab at a time on the machine, as their subnets are
	// picked at random.
	netLabs = processLock{name: "coffer-tests-netlab.lock", how: syscall.LOCK_EX}
)

type processLock struct {
	name      string // the lock file, in the temporary directory
	how       int    // syscall.LOCK_SH or LOCK_EX
	turnstile string // "", or the file locked while waiting for name

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
	if l.turnstile != "" {
		turn, err := lockFile(l.turnstile, syscall.LOCK_EX)
		if err != nil {
			return err
		}
		defer func() { _ = turn.Close() }() // (which unlocks it: only a file lock)
	}
	f, err := lockFile(l.name, l.how)
	if err != nil {
		return err
	}
	l.f, l.holders = f, 1
	return nil
}

// lockFile opens a file of the temporary directory and locks it, waiting
// as long as it takes.
func lockFile(name string, how int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), name), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
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

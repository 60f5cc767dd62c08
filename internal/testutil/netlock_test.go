package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestNetworkLockTwiceInOneTest: a test that asks for the network lock
// twice (two browsers) gets it, rather than waiting on itself.
func TestNetworkLockTwiceInOneTest(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run("twice", func(t *testing.T) {
			LockNetwork(t)
			LockNetwork(t)
		})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the second LockNetwork of one test waits on the first")
	}
	if steadyNetwork.holders != 0 || steadyNetwork.f != nil {
		t.Fatalf("after the test the lock is still held: %d holders", steadyNetwork.holders)
	}
}

// TestNetworkChangeWaitsAheadOfBrowsers: a lab waiting to change
// interfaces while a browser runs keeps the next browsers from starting
// (they would otherwise take turns holding the network, and the lab
// wait for ever), and gets the network once the running one ends.
func TestNetworkChangeWaitsAheadOfBrowsers(t *testing.T) {
	running, err := lockFile(steadyNetwork.name, syscall.LOCK_SH) // another process's browser
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan error, 1)
	go func() {
		err := changingNetwork.acquire()
		if err == nil {
			changingNetwork.release()
		}
		changed <- err
	}()
	// Once the lab waits, it holds the turnstile: a browser cannot pass.
	for deadline := time.Now().Add(time.Minute); browserMayPass(t); {
		if time.Now().After(deadline) {
			t.Fatal("a lab waiting for the network does not hold the turnstile")
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	select {
	case err := <-changed:
		t.Fatalf("the lab changed the network while a browser ran: %v", err)
	default:
	}
	_ = running.Close() // the browser ends
	select {
	case err := <-changed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the lab still waits for the network after the browser ended")
	}
}

// browserMayPass tells whether the turnstile is free (a browser could
// go on to take the network's lock).
func browserMayPass(t *testing.T) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), steadyNetwork.turnstile), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		return true
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false
	default:
		t.Fatal(err)
		return false
	}
}

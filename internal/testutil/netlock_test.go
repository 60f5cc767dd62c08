package testutil

import (
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

package failover

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveLeftoversSparesALiveRun: of two run directories, the one
// whose run lock a live test failover holds is left whole, and the one
// of a killed run (no lock held) is removed with its overlay.
func TestRemoveLeftoversSparesALiveRun(t *testing.T) {
	state := t.TempDir()
	live, dead := filepath.Join(rehearsalRoot(state), "live"), filepath.Join(rehearsalRoot(state), "dead")
	for _, d := range []string{live, dead} {
		if err := os.MkdirAll(filepath.Join(d, "1.0"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "1.0", "vda.qcow2"), []byte("overlay"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock, ok, err := lockRunDir(live)
	if err != nil || !ok {
		t.Fatalf("the live run's lock: %v %v", ok, err)
	}
	defer func() { _ = lock.Close() }()
	if _, err := os.Stat(filepath.Join(dead, runLockName)); err == nil {
		t.Fatal("the dead run has a lock file before the test takes one")
	}
	RemoveLeftovers(context.Background(), state, nil)
	if _, err := os.Stat(filepath.Join(live, "1.0", "vda.qcow2")); err != nil {
		t.Fatalf("the live run's overlay: %v", err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the killed run's directory: %v", err)
	}
	// Once the live run ends (its lock released), it is a leftover too.
	_ = lock.Close()
	RemoveLeftovers(context.Background(), state, nil)
	if _, err := os.Stat(live); !os.IsNotExist(err) {
		t.Fatalf("the ended run's directory: %v", err)
	}
}

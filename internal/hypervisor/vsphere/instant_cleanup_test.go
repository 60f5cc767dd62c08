package vsphere

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCleanupTakesADeadCoffersInstantRecovery: the connection's cleanup
// at start replays the journals of vSphere instant recoveries
// (vsinstant.Cleanup) whose coffer is gone. This journal's process died
// before it mounted anything: the session's directory and the journal
// go, and nothing is reported as removed from the vCenter.
func TestCleanupTakesADeadCoffersInstantRecovery(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	state, sess := t.TempDir(), t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(state, "instant-vsphere", "s1.json")
	if err := os.MkdirAll(filepath.Dir(journal), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"session":"s1","coffer_pid":%d,"datastore":"coffer-instant-s1","vm_name":"app-instant","dir":%q}`, dead.Process.Pid, sess)
	if err := os.WriteFile(journal, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	c := s.connect(t, func(cfg *Config) { cfg.StateDir = state })
	left, err := c.CleanupLeftovers(context.Background())
	if err != nil || len(left) != 0 {
		t.Fatalf("cleanup: %+v, %v", left, err)
	}
	for _, p := range []string{journal, sess} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s outlived the cleanup: %v", p, err)
		}
	}
}

package failover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLeftoverCopyIsEndedBeforeItsOverlaysGo: a killed run's copy of a
// standby domain is ended through its connection before its overlays
// are removed. While it cannot be ended (the host unreachable), the run
// and the overlays are kept for the next clean-up; a record naming a
// directory that is not a test copy's removes nothing.
func TestLeftoverCopyIsEndedBeforeItsOverlaysGo(t *testing.T) {
	state, standby := t.TempDir(), t.TempDir()
	plant := func(run, copyDir string) {
		t.Helper()
		vmDir := filepath.Join(rehearsalRoot(state), run, "1.0")
		if err := os.MkdirAll(vmDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeCopyRecord(vmDir, copyRecord{Host: "lv", Name: "coffer-test-" + run + "-web-1", Dir: copyDir}); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(copyDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copyDir, "vda.qcow2"), []byte("overlay"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyDir := filepath.Join(standby, copyDirPrefix+"run1")
	plant("run1", copyDir)
	notACopy := filepath.Join(standby, "keep")
	plant("run2", notACopy)

	var ended []string
	reachable := false
	destroy := func(_ context.Context, host, name string) error {
		if !reachable {
			return errors.New("connection refused")
		}
		ended = append(ended, host+"/"+name)
		return nil
	}
	RemoveLeftoversOf(context.Background(), state, destroy, nil)
	for _, p := range []string{filepath.Join(copyDir, "vda.qcow2"), filepath.Join(rehearsalRoot(state), "run1")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("with its copy not ended, %s was removed: %v", p, err)
		}
	}
	reachable = true
	RemoveLeftoversOf(context.Background(), state, destroy, nil)
	if len(ended) != 1 || ended[0] != "lv/coffer-test-run1-web-1" {
		t.Fatalf("copies ended: %v", ended)
	}
	for _, p := range []string{copyDir, filepath.Join(rehearsalRoot(state), "run1")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is left: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(notACopy, "vda.qcow2")); err != nil {
		t.Fatalf("a record naming another directory removed it: %v", err)
	}
}

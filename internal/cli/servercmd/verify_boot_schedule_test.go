package servercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
)

// TestScheduledBootVerification: a policy's verify-boot schedule, run by
// `coffer server`, boots the VM's newest point; the verification is a
// task of its own (kind verify-boot, with its VM) in the catalog, and its
// result shows with the point.
func TestScheduledBootVerification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	vm := clitest.StartBootGuest(ctx, t, e)
	state := e.Vars["COFFER_STATE_DIR"]
	e.Must("init")
	e.Config(fmt.Sprintf(`
connections:
  - {name: kvm, kind: qemu, options: {sockets: [%q]}}
policies:
  - name: web
    connection: kvm
    verify-boot:
      schedule: "@every 1s"
      marker: %q
      probes: ["http:%d/=200"]
`, vm.QMPPath, guestvm.BootMarker, guestvm.BootProbePort))
	e.Must("run", "web")
	vm.Kill()

	server := e.Child("server", "--insecure-http", "--listen", "127.0.0.1:0", "--state-dir", state)
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Wait() }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var boots []api.Job
	for {
		if code, out, _ := e.Run("jobs", "--kind", "verify-boot", "--json"); code == 0 && json.Unmarshal([]byte(out), &boots) == nil &&
			countStatus(boots, "success") >= 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("server exited early: %v", err)
		case <-ctx.Done():
			t.Fatalf("no scheduled boot verification succeeded in time: %+v", boots)
		case <-tick.C:
		}
	}
	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}
	for _, j := range boots {
		if j.Status == "success" && (j.VM != "web-1" || j.User != "@schedule") {
			t.Fatalf("a scheduled verification recorded as %+v, want VM web-1 by @schedule", j)
		}
	}
	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &points); err != nil || len(points) != 1 ||
		points[0].BootVerification == nil || !points[0].BootVerification.Passed {
		t.Fatalf("snapshots: %+v %v", points, err)
	}
}

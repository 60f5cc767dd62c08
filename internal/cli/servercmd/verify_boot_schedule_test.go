package servercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestScheduledBootVerification: a policy's verify-boot schedule, on
// Sundays at 06:00 in America/New_York, run by `coffer server` on a
// clock the test drives (COFFER_TEST_CLOCK): the server waits for the
// slot, claims it, boots the VM's newest point as a task of its own
// (kind verify-boot, with its VM) recorded with its slot, and notifies
// a webhook the test serves; the result shows with the point.
func TestScheduledBootVerification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	vm := clitest.StartBootGuest(ctx, t, e)
	h := &hooks{}
	hook := httptest.NewServer(h)
	defer hook.Close()
	e.Must("init")
	e.Config(fmt.Sprintf(`
connections:
  - {name: kvm, kind: qemu, options: {sockets: [%q]}}
policies:
  - name: web
    connection: kvm
    verify-boot:
      schedule: "0 6 * * 0"
      timezone: America/New_York
      marker: %q
      probes: ["http:%d/=200"]
notifications:
  targets: [{name: hook, webhook: {url: %q}}]
  matchers: [{name: every-end, targets: [hook], types: [task-succeeded, task-failed]}]
`, vm.QMPPath, guestvm.BootMarker, guestvm.BootProbePort, hook.URL))
	e.Must("run", "web")
	vm.Kill()

	// Saturday 5 December 2026, noon in New York; the run is due on
	// Sunday at 06:00 EST (11:00 UTC).
	clock := testutil.NewFileClock(t, e.Dir, time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC))
	e.Vars["COFFER_TEST_CLOCK"] = clock.Path
	cat, err := catalogopen.Open(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	l := &lifeEnv{t: t, ctx: ctx, e: e, clock: clock, cat: cat, hooks: h, server: e.StartServer()}
	slot := time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC)
	boot := l.runAt("verify-boot", slot)
	l.claimed("maintenance/default/verify-boot:web", slot)
	if err := l.server.Stop(); err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}
	if boot.VM != "web-1" || boot.User != "@schedule" {
		t.Fatalf("the scheduled verification recorded as %+v, want VM web-1 by @schedule", boot)
	}
	cat.Close() // the command below checks it leaves no catalog file open
	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &points); err != nil || len(points) != 1 ||
		points[0].BootVerification == nil || !points[0].BootVerification.Passed {
		t.Fatalf("snapshots: %+v %v", points, err)
	}
}

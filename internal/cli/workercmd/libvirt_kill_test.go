package workercmd_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt/libvirttest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// libvirtRetryConfig is libvirtConfig with retries, so that a killed
// worker's attempt is run again.
const libvirtRetryConfig = `
maintenance: {worker-dead-after: %s}
connections:
  - {name: lv, kind: libvirt, options: {uri: %q, host: kvm1, state-dir: %q}}
policies:
  - {name: fleet, connections: [lv], schedule: "0 3 1 1 *", snapshot: crash-consistent, retries: {attempts: 3, backoff: 100ms, max-backoff: 100ms}}
`

// TestKilledWorkerLeavesTheDomainClean: the worker of host kvm1 is
// SIGKILLed while libvirt runs its backup job of the domain; the job,
// its checkpoint and the worker's journal stay behind. The worker is
// declared lost; restarted, it cleans them up before it registers, runs
// the retry, and the job succeeds. The retry's point, taken with the
// domain paused by the test, equals its disk (qemu-img compare), and
// libvirt then holds nothing of coffer's beyond the chain's own
// checkpoint (libvirttest.Leftovers).
func TestKilledWorkerLeavesTheDomainClean(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lab := testutil.NewNetLab(t, "kvm1")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	g := clitest.StartLibvirtGuest(t, ctx)
	g.Wait("COFFER READY", 0)
	admin, dom := libvirtAdmin(t, g.D.URI, "web-1")
	lvState := filepath.Join(g.D.Dir, "st")
	e.Config(fmt.Sprintf(libvirtRetryConfig, dead, g.D.URI, lvState))
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	w := startReachWorker(e, lab.Hosts()[0], "lv", "lv/kvm1", dead)
	waitLog(t, srv, "the engine given kvm1", "the engine places units on the workers", "workers=kvm1")

	started := time.Now()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "fleet") }()
	ev := waitEvent(t, cat, started, "kvm1")
	waitBackupJob(t, admin, dom)
	if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = awaitExit(t, w)
	left, err := libvirttest.Leftovers(admin, dom, lvState, "fleet@default")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatal("the killed worker left nothing behind: it was not killed mid-backup, and the cleanup is not tested")
	}
	t.Logf("killed %s after the run started; left in libvirt: %s", killed.Sub(started).Round(time.Millisecond), strings.Join(left, ", "))
	waitWorker(t, cat, "kvm1", "kvm1 lost", func(w catalog.Worker) bool { return w.State == catalog.WorkerLost })
	waitLog(t, srv, "kvm1's units re-admitted", "a lost worker's running units are re-admitted")

	// Pause the domain: the retry's point must then equal its disk.
	g.Virsh("suspend", "web-1")
	w = startReachWorker(e, lab.Hosts()[0], "lv", "lv/kvm1", dead)
	var j api.Job
	select {
	case j = <-done:
	case <-time.After(2 * patience):
		t.Fatalf("the run did not end after kvm1's restart\n%s", srv.Log())
	}
	t.Logf("the run ended %s after the kill: %s", time.Since(killed).Round(time.Millisecond), j.Status)
	point := retriedPoint(t, cat, j, ev)
	if !strings.Contains(w.Log(), "removed leftover") {
		t.Errorf("the restarted worker did not say it removed its killed process's leftovers:\n%s", w.Log())
	}
	restored := filepath.Join(e.Dir, "restored.raw")
	e.Must("restore", point, "--to", restored)
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-U", "-f", "raw", "-F", "qcow2", restored, g.Disk).CombinedOutput(); err != nil {
		t.Fatalf("the retry's point differs from the paused domain's disk: %v %s", err, out)
	}
	g.Virsh("resume", "web-1")
	if left, err := libvirttest.Leftovers(admin, dom, lvState, "fleet@default"); err != nil || len(left) != 0 {
		t.Fatalf("left behind in libvirt after the retry: %v %v", left, err)
	}
}

// waitBackupJob waits until libvirt runs a backup job of dom (the worker
// then reads its export).
func waitBackupJob(t *testing.T, admin *golibvirt.Libvirt, dom golibvirt.Domain) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		if _, err := admin.DomainBackupGetXMLDesc(dom, 0); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backup job of the domain within %s", patience)
		}
		time.Sleep(5 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

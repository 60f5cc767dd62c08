package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleWorkers: the Workers page lists a running `coffer worker`
// process (ready, its reach and slots) and a worker declared lost; its
// Drain button drains the live one, whose process then ends by itself.
// The drained worker's credential is then revoked on the page (a name
// the API refuses and one without a credential are refused under the
// form), and its token no longer logs in.
func TestConsoleWorkers(t *testing.T) {
	l := newLab(t)
	// Workers need the servers' PostgreSQL catalog (a SQLite one has none).
	l.vars["COFFER_CATALOG"] = testutil.StartPostgres(t)
	l.coffer("init")
	ctx := context.Background()
	cat, err := catalogopen.Open(ctx, l.vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	// A worker that was lost a while ago, as the leader's watch leaves it.
	if _, err := cat.RegisterWorker(ctx, catalog.Worker{Name: "esx-proxy", Host: "proxy1.example", Version: "dev", Protocol: 1,
		Slots: 8, Reach: catalog.WorkerReach{Connections: []string{"vc1"}, Repositories: []string{"default"}}}, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.DeclareWorkersLost(ctx, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	l.start()
	// The server migrates River's schema once it serves; a worker checks
	// it before it registers, and refuses an older one.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(l.srv.log(), "River client started"); {
		if time.Now().After(deadline) {
			t.Fatalf("the server started no River client within a minute:\n%s", l.srv.log())
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace
	}
	// The worker logs in with a token of its own, as a worker must.
	tokenFile := filepath.Join(t.TempDir(), "kvm1.token")
	if err := os.WriteFile(tokenFile, []byte(l.coffer("workers", "token", "create", "kvm1")), 0o600); err != nil {
		t.Fatal(err)
	}
	address := strings.Replace(l.vars["COFFER_CATALOG"], "test@", "", 1)
	worker := exec.Command(os.Args[0], "worker", "--name", "kvm1", "--slots", "4", "--reach-connections", "lab",
		"--reach-hosts", "kvm1", "--reach-datastores", "local", "--can-boot", "--heartbeat", "1s",
		"--catalog", address, "--token-file", tokenFile)
	var workerLog testutil.LockedBuffer
	worker.Stdout, worker.Stderr = &workerLog, &workerLog
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the worker's log:\n%s", workerLog.String())
		}
	})
	worker.Env = append(os.Environ(), "COFFER_TEST_AS_CLI=1")
	for k, v := range l.vars {
		worker.Env = append(worker.Env, k+"="+v)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	t.Cleanup(func() {
		if worker.ProcessState == nil {
			_ = worker.Process.Kill()
		}
	})
	c := l.chrome()
	c.firstRun()

	c.open("/ui/workers")
	for !strings.Contains(c.text("#worker-kvm1"), "ready") { // until the process has registered
		select {
		case err := <-exited:
			t.Fatalf("the worker exited: %v", err)
		case <-time.After(200 * time.Millisecond): // a poll's pace
		}
		c.open("/ui/workers")
	}
	if row := c.text("#worker-kvm1"); !strings.Contains(row, "0 of 4") || !strings.Contains(row, "hosts kvm1") ||
		!strings.Contains(row, "can boot VMs") || !strings.Contains(row, fmt.Sprintf("protocol %d", fleet.Protocol)) {
		t.Fatalf("the live worker's row: %q", row)
	}
	if row := c.text("#worker-esx-proxy"); !strings.Contains(row, "lost") || !strings.Contains(row, "0 of 8") ||
		!strings.Contains(row, "1h") {
		t.Fatalf("the lost worker's row: %q", row)
	}
	c.shot("workers")
	// The page the drain answers with shows it draining (and no Drain
	// button): read that page, not the one the click was made on.
	c.clickAway("#drain-kvm1")
	if row := c.text("#worker-kvm1"); !strings.Contains(row, "draining") {
		t.Fatalf("after the drain: %q", row)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the drained worker: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the drained worker did not exit")
	}
	c.open("/ui/workers")
	if rows := c.text("#workers tbody"); strings.Contains(rows, "kvm1") {
		t.Fatalf("the drained worker is still listed: %q", rows)
	}
	revokeWorker(t, l, c, address, tokenFile)
}

// revokeWorker revokes kvm1's credential on the Workers page; its token
// then no longer logs in.
func revokeWorker(t *testing.T, l *lab, c *chrome, address, tokenFile string) {
	revoke := func(name string) {
		c.run(chromedp.SetValue("#revoke-name", name), chromedp.Click("#revoke-submit"))
	}
	c.run(chromedp.Click("#revoke-worker summary"))
	revoke("Not A Name")
	c.waitText("#revoke-result", "Failed")
	revoke("nobody")
	c.waitText("#revoke-result", "worker nobody has no credential")
	revoke("kvm1")
	c.waitText("#revoke-result", "The credential of worker kvm1 is revoked")
	c.shot("workers-revoke")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	again := exec.CommandContext(ctx, os.Args[0], "worker", "--name", "kvm1", "--catalog", address, "--token-file", tokenFile)
	again.Env = append(os.Environ(), "COFFER_TEST_AS_CLI=1")
	for k, v := range l.vars {
		again.Env = append(again.Env, k+"="+v)
	}
	if out, err := again.CombinedOutput(); err == nil || !strings.Contains(string(out), "the catalog refused worker kvm1's token") {
		t.Fatalf("the revoked token: %v\n%s", err, out)
	}
}

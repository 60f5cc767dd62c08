package console_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/guestvm"
)

// TestConsoleFailoverPlan: the Failover plans page, linked from the
// Restore page, shows a plan's group with its VM and probe; an
// administrator confirms and starts a test failover of a real QEMU
// guest's standby, a task the browser follows to its success; the page
// then lists the run with its steps (start, discard) and its probe's
// result, as the API's failover-plan-runs and `coffer failover runs`
// give them, read back from the job's events. An Auditor sees the plan
// and its runs but no action, and the API refuses them the test
// failover (Sys.Failover). Both pages pass axe.
func TestConsoleFailoverPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l := newLab(t)
	vm := startBootGuest(ctx, t, l)
	standbys := filepath.Join(l.dir, "dr")
	probe := fmt.Sprintf("http:%d/=200", guestvm.BootProbePort)
	l.config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + l.dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web-1], connection: dr, directory: ` + standbys + `, keep: 2}
failover-plans:
  - name: shop
    replication: web-dr
    groups:
      - vms: [{name: web-1}]
        probes: ["` + probe + `"]
        probe-timeout: 4m
`)
	l.coffer("init")
	l.coffer("backup", "vm", vm.QMPPath)
	vm.Kill()
	l.coffer("replicas", "run", "web-dr")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/restore")
	c.clickAway("#failover-link")
	c.waitText("#group-shop-1", "web-1")
	c.waitText("#group-shop-1", probe)
	c.waitText("#no-runs-shop", "Not run yet")
	c.run(chromedp.Click("#actions-shop summary"), chromedp.WaitVisible("#test-shop"))
	c.axe("failover")
	c.run(chromedp.Click("#fconfirm-shop"))
	c.clickAway("#test-shop")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the test failover opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	c.finalDetails()
	c.waitText("main", "probe "+probe)

	c.open("/ui/failover")
	runs := c.text("#runs-shop")
	if !strings.Contains(runs, "test") || !strings.Contains(runs, "success") || !strings.Contains(runs, "admin") {
		t.Fatalf("the plan's runs: %q", runs)
	}
	if n := c.count("#runs-shop tbody tr"); n != 1 {
		t.Fatalf("%d runs listed, want 1", n)
	}
	steps := c.text("details[id^=steps-]")
	for _, want := range []string{"start", "discard", "passed: "} {
		if !strings.Contains(steps, want) {
			t.Fatalf("the run's steps and probes lack %q: %q", want, steps)
		}
	}
	c.shot("failover")
	c.axe("failover runs")

	admin := l.adminToken()
	var doc api.FailoverPlanRuns
	if code := l.get(admin, "/api/v1/failover-plans/shop/runs", &doc); code != 200 || !doc.MayRun || len(doc.Runs) != 1 {
		t.Fatalf("the API's runs: %d %+v", code, doc)
	}
	r := doc.Runs[0]
	if r.Kind != "test" || r.Status != "success" || len(r.Probes) != 1 || !r.Probes[0].Passed || r.Probes[0].Probe != probe ||
		len(r.Steps) != 2 || r.Steps[0].Name != "start" || r.Steps[0].VM != "web-1" || r.Steps[0].Seconds <= 0 || r.Steps[1].Name != "discard" {
		t.Fatalf("the API's run: %+v", r)
	}
	if out := l.coffer("failover", "runs", "shop"); !strings.Contains(out, "probe "+probe) || !strings.Contains(out, fmt.Sprintf("job %d: test by admin, success", r.JobID)) {
		t.Fatalf("coffer failover runs:\n%s", out)
	}
	if len(doc.Standbys) != 1 || doc.Standbys[0].VM != "web-1" || doc.Standbys[0].FailedOver || doc.Standbys[0].Unknown != "" {
		t.Fatalf("the standbys: %+v", doc.Standbys)
	}

	auditorSeesNoAction(t, l, admin)
}

// auditorSeesNoAction: an Auditor sees shop's run and no action, and the
// API refuses them the test failover without making a run.
func auditorSeesNoAction(t *testing.T, l *lab, admin string) {
	t.Helper()
	pwFile := filepath.Join(l.dir, "pw")
	if err := os.WriteFile(pwFile, []byte("auditor pass phrase"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.coffer("user", "create", "auditor", "--password-file", pwFile)
	l.coffer("acl", "set", "/", "auditor", "Auditor")
	auditor := l.chrome()
	auditor.signIn("auditor", "auditor pass phrase")
	auditor.open("/ui/failover")
	auditor.waitText("#no-actions-shop", "Sys.Failover")
	if n := auditor.count("#plan-shop form"); n != 0 {
		t.Fatalf("the auditor sees %d forms on the plan", n)
	}
	auditor.waitText("#runs-shop", "success")
	auditor.axe("failover as auditor")
	tok := strings.TrimSpace(l.coffer("token", "create", "--user", "auditor", "--grant", "/=Auditor", "--lifetime", "1d"))
	if code := l.post(tok, "/api/v1/failover-plans/shop/test"); code != http.StatusForbidden {
		t.Fatalf("the auditor's test failover through the API: %d, want 403", code)
	}
	var doc api.FailoverPlanRuns
	if l.get(admin, "/api/v1/failover-plans/shop/runs", &doc); len(doc.Runs) != 1 {
		t.Fatalf("the refused request made a run: %+v", doc.Runs)
	}
}

// post sends an empty POST with a token and returns the status.
func (l *lab) post(token, path string) int {
	l.t.Helper()
	pem, err := os.ReadFile(filepath.Join(l.vars["COFFER_STATE_DIR"], "server", "tls.crt"))
	if err != nil {
		l.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, _ := http.NewRequest("POST", l.srv.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer res.Body.Close()
	var problem json.RawMessage
	_ = json.NewDecoder(res.Body).Decode(&problem)
	l.t.Logf("POST %s: %d %s", path, res.StatusCode, problem)
	return res.StatusCode
}

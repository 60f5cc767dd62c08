package servercmd_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestPrometheusScrapesTheServer: Debian's Prometheus scrapes a coffer
// server as docs/metrics.md says (HTTPS pinned to the server's
// certificate, an Auditor's token) with deploy/monitoring's rules. Every
// query of the dashboard returns a series (those of workers and
// notification targets, which this server has none of, a 0); once the
// server stops, CofferServerDown fires.
func TestPrometheusScrapesTheServer(t *testing.T) {
	prometheus := testutil.RequireBinary(t, "prometheus")
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(`
connections:
  - {name: lab, kind: fake, options: {seed: 3, vms: 2, hosts: 1, datastores: 1, disk-size: 128KiB}}
policies:
  - {name: web, connection: lab, rpo: 26h}
maintenance: {health-every: 1s, stats-every: 1s}
`)
	s := e.StartServer()
	admin := e.AdminToken()
	if job := s.RunPolicy(admin, "web"); job.Status != "success" {
		t.Fatalf("the policy's run: %+v", job)
	}
	for _, op := range [][]string{{"verify"}, {"gc"}, {"restore", "latest", "--disk", "0", "--to", "vm.raw"}} { // each has a panel
		if code, out, errOut := e.Remote(s, admin, op...); code != 0 {
			t.Fatalf("%s through the server: %d %s %s", op, code, out, errOut)
		}
	}
	// The scraper's account, as docs/metrics.md makes it.
	e.Must("user", "create", "prometheus")
	e.Must("acl", "set", "/system", "prometheus", "Auditor")
	token := strings.TrimSpace(e.Must("token", "create", "--user", "prometheus", "--grant", "/system=Auditor", "--lifetime", "1d"))

	api := startPrometheus(t, prometheus, s, token, filepath.Join(e.Vars["COFFER_STATE_DIR"], "server", "tls.crt"))
	for _, expr := range dashboardQueries(t) {
		if !api.eventually(expr, 90*time.Second) {
			t.Errorf("the dashboard's query returned no series: %s", expr)
		}
	}
	// Idle between the test's requests, it runs on one Go processor
	// (package procs).
	if !api.eventually(`go_sched_gomaxprocs_threads{job="coffer"} == 1`, 90*time.Second) {
		t.Error("the idle server did not go down to one Go processor")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !api.eventually(`ALERTS{alertname="CofferServerDown",alertstate="firing"}`, 90*time.Second) {
		t.Fatal("CofferServerDown did not fire after the server stopped")
	}
}

// dashboardQueries are the expressions of deploy/monitoring's dashboard.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	return exprs
}

type promAPI struct {
	t   *testing.T
	url string
}

// startPrometheus runs Prometheus scraping s every second, with the kit's
// alert rules; CofferServerDown's 2 minutes become 3 seconds, so that
// the test need not wait them out (the expression is the kit's).
func startPrometheus(t *testing.T, bin string, s *clitest.ServerProc, token, certFile string) *promAPI {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile("../../../deploy/monitoring/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	quick := strings.Replace(string(rules), "expr: up{job=\"coffer\"} == 0\n        for: 2m", "expr: up{job=\"coffer\"} == 0\n        for: 3s", 1)
	if quick == string(rules) {
		t.Fatal("CofferServerDown's rule is not where the test expects it")
	}
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"alerts.yml": quick, "token": token, "config.yml": fmt.Sprintf(`
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%s/alerts.yml]
scrape_configs:
  - job_name: coffer
    scheme: https
    authorization: {credentials_file: %s/token}
    tls_config: {ca_file: %s}
    static_configs: [{targets: ["%s"]}]
`, dir, dir, certFile, target.Host)}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen := freeAddress(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "config.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen)
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("prometheus' log:\n%s", b)
		}
	})
	api := &promAPI{t: t, url: "http://" + listen}
	if !api.eventually(`up{job="coffer"} == 1`, 60*time.Second) {
		t.Fatal("Prometheus never scraped the server")
	}
	return api
}

func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls an instant query until it returns a series, within
// patience: Prometheus' scrapes and rule evaluations run on their own
// clock, each second.
func (p *promAPI) eventually(expr string, patience time.Duration) bool {
	p.t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.series(expr) > 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

// series is how many series the instant query returns now (0 when
// Prometheus does not answer yet).
func (p *promAPI) series(expr string) int {
	res, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return 0
	}
	if body.Status == "error" {
		p.t.Errorf("query %s: %s", expr, body.Error)
	}
	return len(body.Data.Result)
}

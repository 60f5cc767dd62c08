package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/console"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestDemoServe runs the quick start's first command with --serve as a
// person would: after its checks the demo serves the console on
// 127.0.0.1 over its own repository and catalog; the printed one-time
// link sets the administrator's password, the password signs in, and the
// API and the console's points pages show the demo's backup points of
// demo-vm. SIGTERM then ends the process with exit 0.
func TestDemoServe(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two VMs")
	}
	testutil.RequireBinary(t, "qemu-system-x86_64")
	if _, err := guestvm.Build(context.Background()); err == guestvm.ErrNoAssets && !testutil.Strict() {
		t.Skip(err)
	}
	if !console.Built() {
		if testutil.Strict() {
			t.Fatal("the console's front-end files are missing: run scripts/build-ui.sh")
		}
		t.Skip("the console's front-end files are missing: run scripts/build-ui.sh")
	}
	e := clitest.NewEnv(t)
	dir := filepath.Join(e.Dir, "demo")
	// Ready once the announcement's last line is read: the scanner reads
	// line by line, and the link comes before the rest of it.
	ready := func(s *clitest.ServerProc) bool {
		return s.URL != "" && s.SetupToken != "" && strings.Contains(s.Stderr.String(), "Ctrl-C stops the server")
	}
	s := e.StartCoffer(ready, 10*time.Minute, "demo", "--serve", "--dir", dir)
	out := s.Log()
	for _, want := range []string{"COFFER CHECK OK", "demo finished", "/ui/setup#" + s.SetupToken, "Ctrl-C"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || !strings.Contains(out, s.URL+"/ui/setup#") {
		t.Fatalf("the console is not served on 127.0.0.1 at the link's address (%s):\n%s", s.URL, out)
	}
	// The demo's own catalog, not the one the environment names.
	if _, err := os.Stat(e.Vars["COFFER_CATALOG"]); !os.IsNotExist(err) {
		t.Errorf("the demo wrote the environment's catalog %s: %v", e.Vars["COFFER_CATALOG"], err)
	}

	// Before signing in the console shows nothing of the demo.
	if code, body := consoleGet(t, s, nil, "/ui/points/default"); code == 200 && strings.Contains(body, "demo-vm") {
		t.Fatalf("the points page without a session: %d, names the VM", code)
	}
	const pw = "the demo's administrator password"
	var done api.SetupDone
	if code, _ := s.Call("", "POST", "/access/setup", map[string]any{"token": s.SetupToken, "password": pw}, &done); code != 200 || done.User != "admin" {
		t.Fatalf("setup through the printed link's token: %d %+v", code, done)
	}
	var sess api.Session
	code, h := s.Call("", "POST", "/access/login", map[string]any{"user": "admin", "password": pw}, &sess)
	if code != 200 || sess.User != "admin" {
		t.Fatalf("sign-in: %d %+v", code, sess)
	}
	cookies := (&http.Response{Header: h}).Cookies()
	if len(cookies) == 0 {
		t.Fatal("sign-in set no session cookie")
	}

	// The API lists the demo's full and incremental points of demo-vm.
	req, _ := http.NewRequest("GET", s.URL+server.Prefix+"/repositories/default/points", nil)
	var points []api.BackupPoint
	if code := sendJSON(t, s, req, cookies, &points); code != 200 || len(points) != 2 {
		t.Fatalf("the API's points: %d %+v", code, points)
	}
	for _, p := range points {
		if p.VM != "demo-vm" {
			t.Fatalf("a point of %q, not of the demo's VM: %+v", p.VM, p)
		}
	}

	// The console's points pages name the VM and its points.
	// The first screen a newcomer sees: the demo's guest, still running,
	// protected by the demo's policy.
	req, _ = http.NewRequest("GET", s.URL+server.Prefix+"/vms", nil)
	var inv api.Inventory
	if code := sendJSON(t, s, req, cookies, &inv); code != 200 || len(inv.VMs) != 1 || inv.VMs[0].VM != "demo-vm" ||
		!inv.VMs[0].Covered || !slices.Contains(inv.VMs[0].Policies, "demo") {
		t.Fatalf("the API's VMs: %d %+v", code, inv)
	}
	if code, body := consoleGet(t, s, cookies, "/ui/"); code != 200 || !strings.Contains(body, `id="vms-recent">1<`) {
		t.Fatalf("the dashboard does not show the demo's VM protected: %d\n%s", code, body)
	}

	if code, body := consoleGet(t, s, cookies, "/ui/points/default"); code != 200 || !strings.Contains(body, "demo-vm") {
		t.Fatalf("the console's points page: %d\n%s", code, body)
	}
	code, body := consoleGet(t, s, cookies, "/ui/points/default/vm/demo-vm")
	if code != 200 {
		t.Fatalf("the console's page of demo-vm: %d\n%s", code, body)
	}
	for _, p := range points {
		if !strings.Contains(body, p.ShortID) {
			t.Errorf("the console's page of demo-vm lacks point %s:\n%s", p.ShortID, body)
		}
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("the demo after SIGTERM: %v\n%s", err, s.Log())
	}
	if _, err := os.Stat(filepath.Join(dir, "repo")); err != nil {
		t.Fatalf("the repository of a demo run with --dir is gone: %v", err)
	}
}

// TestDemoServeRefusesBadListen: an address the console could not be
// served on is refused before the demo runs (exit 2), saying what to do.
func TestDemoServeRefusesBadListen(t *testing.T) {
	e := clitest.NewEnv(t)
	dir := filepath.Join(e.Dir, "demo")
	if out := e.Expect(command.ExitUsage, "demo", "--disk-image", "--serve", "--listen", "0.0.0.0:8080", "--dir", dir); !strings.Contains(out, "ssh -L") {
		t.Fatalf("plain HTTP on every address: %s", out)
	}
	if out := e.Expect(command.ExitUsage, "demo", "--disk-image", "--listen", "127.0.0.1:8080", "--dir", dir); !strings.Contains(out, "--serve") {
		t.Fatalf("--listen without --serve: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "repo")); !os.IsNotExist(err) {
		t.Fatalf("the demo ran despite the refusal: %v", err)
	}
}

// consoleGet fetches a console page with the session's cookies (none: as
// a stranger), not following redirects.
func consoleGet(t *testing.T, s *clitest.ServerProc, cookies []*http.Cookie, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	c := s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// sendJSON sends req with the session's cookies and decodes the answer.
func sendJSON(t *testing.T, s *clitest.ServerProc, req *http.Request, cookies []*http.Cookie, out any) int {
	t.Helper()
	for _, c := range cookies {
		req.AddCookie(c)
	}
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v\n%s", req.URL, err, b)
		}
	}
	return res.StatusCode
}

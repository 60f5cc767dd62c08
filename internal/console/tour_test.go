package console_test

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
)

const adminPassword = "a long pass phrase of the admin"

// tourConfig is a simulated fleet (the test binary's kind: fake) beside
// the disk image, so that the inventory, the dashboard and the policies
// have VMs to show.
const tourConfig = `
connections:
  - {name: lab, kind: fake, options: {seed: 11, vms: 4, hosts: 1, datastores: 1, disk-size: 256KiB}}
policies:
  - name: nightly
    connection: lab
    select: {names: ["web-*"]}
    schedule: "0 22 * * *"
    retention: {keep-last: 7}
`

// tourLab is an installation with points of a disk image holding real
// files and of the simulated fleet's VMs, and its server started.
func tourLab(t *testing.T) (*lab, map[string][]byte) {
	l := newLab(t)
	l.config(tourConfig)
	data := make([]byte, 300<<10)
	_, _ = rand.Read(data)
	files := map[string][]byte{"etc/motd": []byte("restored through the console\n"), "srv/data.bin": data}
	img := l.ext4Image("web-disk", files)
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "files")
	l.coffer("run", "nightly")
	l.start()
	return l, files
}

// signIn signs in through the sign-in page.
func (c *chrome) signIn(user, password string) {
	c.t.Helper()
	c.open("/ui/login")
	c.run(chromedp.SendKeys("#user", user), chromedp.SendKeys("#password", password), chromedp.Click("#signin"),
		chromedp.WaitVisible("#who"))
	if got := c.text("#who"); got != user {
		c.t.Fatalf("signed in as %q, want %s", got, user)
	}
}

// TestConsoleTour: the first run (the setup link chooses the admin's
// password and signs them in), sign-out and sign-in, every page with a screenshot and an accessibility
// check, a file and a folder downloaded through the browser and compared
// with the source, an API token made in the console that then works, and
// sign-out.
func TestConsoleTour(t *testing.T) {
	l, files := tourLab(t)
	if l.srv.setupToken == "" {
		t.Fatalf("the first start printed no setup link:\n%s", l.srv.log())
	}
	c := l.chrome()

	// First run: the link's token travels in the fragment only.
	c.open("/ui/setup#" + l.srv.setupToken)
	if loc := c.location(); strings.Contains(loc, "coffersetup_") {
		t.Fatalf("the setup token stays in the address bar: %s", loc)
	}
	c.run(chromedp.SendKeys("#new-password", adminPassword), chromedp.SendKeys("#again", adminPassword))
	c.shot("setup")
	c.run(chromedp.Click("#setup-submit"), chromedp.WaitVisible("#who")) // signed in, on the dashboard
	if got, loc := c.text("#who"), c.location(); got != "admin" || !strings.HasSuffix(loc, "/ui/") {
		t.Fatalf("after the setup link: signed in as %q at %s, want admin on the dashboard", got, loc)
	}
	c.run(chromedp.Click("#signout"), chromedp.WaitVisible("#signin"))
	c.open("/ui/setup#" + l.srv.setupToken) // a second use is refused
	c.run(chromedp.SendKeys("#new-password", adminPassword+"!"), chromedp.SendKeys("#again", adminPassword+"!"),
		chromedp.Click("#setup-submit"), chromedp.WaitVisible(".notice.bad"))

	// Without a session every page leads to the sign-in page, and back.
	c.open("/ui/tasks")
	if loc := c.location(); !strings.Contains(loc, "/ui/login?next=%2Fui%2Ftasks") {
		t.Fatalf("a page without a session went to %s", loc)
	}
	c.run(chromedp.SendKeys("#user", "admin"), chromedp.SendKeys("#password", "wrong password here"), chromedp.Click("#signin"),
		chromedp.WaitVisible("#login-error"))
	c.shot("login")
	c.run(chromedp.SendKeys("#password", adminPassword), chromedp.Click("#signin"), chromedp.WaitVisible("#tasks"))

	// The dashboard: the fleet's protection, failures, next runs.
	c.open("/ui/")
	c.run(chromedp.WaitVisible("#repos article"))
	var inv api.Inventory
	if code := l.get(l.adminToken(), "/api/v1/vms", &inv); code != 200 {
		t.Fatalf("vms: %d", code)
	}
	protected, unprotected := 0, 0
	for _, vm := range inv.VMs {
		switch {
		case len(vm.Policies) == 0:
			unprotected++
		case vm.Covered:
			protected++
		}
	}
	if protected == 0 || unprotected == 0 {
		t.Fatalf("the fleet should have both protected and unprotected VMs: %+v", inv.VMs)
	}
	if got := c.text("#vms-recent"); got != strconv.Itoa(protected) {
		t.Errorf("dashboard: %s VMs protected, the inventory says %d", got, protected)
	}
	if got := c.text("#vms-unprotected"); got != strconv.Itoa(unprotected) {
		t.Errorf("dashboard: %s VMs unprotected, the inventory says %d", got, unprotected)
	}
	// The planner held to its record: the policy's run above predicted
	// itself as it started, and the dashboard sets that beside the run.
	c.run(chromedp.WaitVisible("#planner-record"))
	var acc api.PlanAccuracies
	if code := l.get(l.adminToken(), "/api/v1/policies/plan/accuracy", &acc); code != 200 || len(acc.Policies) != 1 ||
		acc.Policies[0].Policy != "nightly" || len(acc.Policies[0].Runs) != 1 || len(acc.Unpredicted) != 0 {
		t.Fatalf("plan accuracies (%d): %+v", code, acc)
	}
	run := acc.Policies[0].Runs[0]
	if row := c.text("#planner-record tbody"); !strings.Contains(row, "nightly") || !strings.Contains(row, fmt.Sprintf("%.0f%%)", math.Abs(100*run.Error))) ||
		!strings.Contains(row, fmt.Sprintf("%.0f%%", 100*acc.Policies[0].WithinP90)) {
		t.Errorf("the planner's record on the dashboard: %q; the API: %+v", row, run)
	}
	c.shot("dashboard")

	// Tasks, and the policy run's task.
	c.open("/ui/tasks")
	c.shot("tasks")
	c.open("/ui/tasks?kind=backup-policy")
	c.run(chromedp.Click("#tasks tbody tr a"), chromedp.WaitVisible("#log li"))
	c.waitText("#task-status", "success")
	c.shot("task")

	// Backup points: repository, source, point, files.
	c.open("/ui/points")
	c.shot("points")
	c.open("/ui/points/default/vm/files")
	c.shot("points-vm")
	c.run(chromedp.Click("#points tbody tr a"), chromedp.WaitVisible("#browse-files"))
	c.shot("point")
	c.run(chromedp.Click("#browse-files"), chromedp.WaitVisible("#files"))
	filesPage := c.location()
	c.run(chromedp.Click(`#files a.dir[href*="srv"]`), chromedp.WaitVisible(`#files a[aria-label="Download data.bin"]`))
	c.shot("files")
	c.run(chromedp.Click(`#files a[aria-label="Download data.bin"]`))
	got, name := c.download()
	if name != "data.bin" || !bytes.Equal(got, files["srv/data.bin"]) {
		t.Fatalf("downloaded %s (%d bytes): not data.bin's %d bytes", name, len(got), len(files["srv/data.bin"]))
	}
	// A folder as a zip, from a search.
	c.run(chromedp.Click(`nav.crumbs li:first-child a`), chromedp.WaitVisible("#pattern"),
		chromedp.SendKeys("#pattern", "motd"), chromedp.Click("#find"), chromedp.WaitVisible("#found"))
	if found := c.text("#found"); !strings.Contains(found, "/etc/motd") {
		t.Fatalf("find motd: %q", found)
	}
	c.shot("files-find")
	c.run(chromedp.Click(`#found a[href*="download"]`))
	if got, _ := c.download(); !bytes.Equal(got, files["etc/motd"]) {
		t.Fatalf("the found motd downloaded as %q", got)
	}
	c.run(chromedp.Navigate(filesPage+"?path=%2Fetc"), chromedp.WaitVisible("#folder-zip"))
	c.run(chromedp.Click("#folder-zip"))
	zipped, _ := c.download()
	if got := unzip(t, zipped, "etc/motd"); !bytes.Equal(got, files["etc/motd"]) {
		t.Fatalf("the zip of /etc holds motd %q", got)
	}

	// Inventory, policies, repositories.
	c.open("/ui/inventory")
	ages := c.text("#inventory-ages")
	for _, st := range inv.Connections {
		if st.RefreshedAt.IsZero() || !strings.Contains(ages, st.Connection+": listed ") {
			t.Errorf("inventory: the age of %s's listing (refreshed at %s) shown as %q", st.Connection, st.RefreshedAt, ages)
		}
	}
	// Every VM counted, those with no policy first; "only those that
	// need a look" leaves out the protected (their points are minutes
	// old, well within the default RPO).
	if got, want := c.text("#inventory-count"), fmt.Sprintf("%d of %d", len(inv.VMs), len(inv.VMs)); got != want {
		t.Errorf("inventory: %q VMs shown, want %q", got, want)
	}
	if first := c.text("#vms tbody tr:first-child td:nth-child(6)"); !strings.Contains(first, "no policy") {
		t.Errorf("inventory: the first VM is not one without a policy: its policies %q", first)
	}
	c.shot("inventory")
	c.open("/ui/inventory?only=unprotected")
	if got, want := c.text("#inventory-count"), fmt.Sprintf("%d of %d", len(inv.VMs)-protected, len(inv.VMs)); got != want {
		t.Errorf("inventory, only those that need a look: %q VMs shown, want %q", got, want)
	}
	c.open("/ui/policies")
	c.shot("policies")
	c.open("/ui/policies/nightly")
	c.shot("policy")
	// Its plan, with a what-if beside the configuration.
	c.run(chromedp.Click("#plan-policy"), chromedp.WaitVisible("#plan-scenarios"))
	c.run(chromedp.SendKeys("#plan-whatif", "tasks=64"), chromedp.SendKeys("#plan-window", "8"), chromedp.Click("#plan-submit"),
		chromedp.WaitVisible("#plan-scenarios"))
	var plan api.Plan
	if code := l.get(l.adminToken(), "/api/v1/policies/nightly/plan", &plan); code != 200 {
		t.Fatalf("plan: %d", code)
	}
	// Each scenario with what its retention keeps: a limit changes how
	// a run goes, not what is kept.
	if sum, rows := c.text("#plan-summary"), c.text("#plan-scenarios tbody"); !strings.Contains(sum, "VMs: "+strconv.Itoa(plan.VMs)) ||
		!strings.Contains(sum, "8h") || !strings.Contains(rows, "as configured") || !strings.Contains(rows, "tasks=64") ||
		strings.Count(rows, config.HumanBytes(plan.Scenarios[0].Capacity.PeakBytes)+", "+strconv.Itoa(plan.VMs)+" VM") != 2 {
		t.Errorf("the plan page says %q with scenarios %q; the API plans %d VMs", sum, rows, plan.VMs)
	}
	// What the P90 carries: the record, or the costs' spread alone.
	if basis, want := c.text("#plan-p90-basis"), plan.P90Basis; !strings.Contains(basis, "P90") ||
		strings.Contains(basis, "carries only") != strings.Contains(want, "carries only") {
		t.Errorf("the plan page says of its P90 %q; the API %q", basis, want)
	}
	// The capacity forecast: the steady state the API forecasts, and
	// its repository's verdict (its free space, which other work on
	// this machine changes, aside).
	cp := plan.Capacity
	verdict, _, _ := strings.Cut(cp.Repository.Full, ":")
	if steady, full := c.text("#capacity-steady"), c.text("#capacity-full"); cp.SteadyAt == nil ||
		!strings.Contains(steady, config.HumanBytes(cp.PeakBytes)) || !strings.Contains(steady, cp.SteadyAt.Local().Format(time.DateOnly)) ||
		!strings.HasPrefix(full, verdict+":") || !strings.Contains(c.text("#capacity-policies"), "nightly") {
		t.Errorf("the plan page's capacity says %q and %q; the API forecasts %+v", steady, full, cp)
	}
	c.shot("plan")
	c.open("/ui/repositories")
	c.run(chromedp.Click("#verify-default"), chromedp.WaitVisible("#verify-ok"))
	c.shot("repositories")
	// The fleet's workers: none here (TestConsoleWorkers shows some, and
	// takes the page's screenshot).
	c.open("/ui/workers")
	c.waitText("#workers", "No worker is registered")
	c.axe("workers")

	// Access: a token made here works against the API.
	c.open("/ui/access")
	c.run(chromedp.Click("#new-token summary"), chromedp.SendKeys("#token-comment", "made in the console"),
		chromedp.SetValue("#token-role", "Auditor"), chromedp.Click("#create-token"), chromedp.WaitVisible("#token-secret"))
	var secret string
	c.run(chromedp.Value("#token-secret", &secret))
	c.shot("access")
	if !strings.HasPrefix(secret, "coffer_") {
		t.Fatalf("the new token is %q", secret)
	}
	var pts []api.BackupPoint
	if code := l.get(secret, "/api/v1/repositories/default/points", &pts); code != 200 || len(pts) == 0 {
		t.Fatalf("the console's token listing points: %d, %d points", code, len(pts))
	}
	if code := l.get(secret, "/api/v1/access/users", nil); code != 200 {
		t.Fatalf("the console's token: %d", code)
	}
	c.open("/ui/access/audit?operation=create-token")
	c.waitText("#audit", "create-token")
	c.shot("audit")

	// Sign-out ends the session.
	c.run(chromedp.Click("#signout"), chromedp.WaitVisible("#signin"))
	c.open("/ui/")
	if loc := c.location(); !strings.Contains(loc, "/ui/login") {
		t.Fatalf("after sign-out the dashboard opened at %s", loc)
	}
}

// get calls the API with a token, trusting the server's certificate.
func (l *lab) get(token, path string, out any) int {
	l.t.Helper()
	pem, err := os.ReadFile(filepath.Join(l.vars["COFFER_STATE_DIR"], "server", "tls.crt"))
	if err != nil {
		l.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, _ := http.NewRequest("GET", l.srv.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		_ = json.NewDecoder(res.Body).Decode(out)
	}
	return res.StatusCode
}

// adminToken makes an API token of the administrator's on the server's
// host, as an operator does.
func (l *lab) adminToken() string {
	l.t.Helper()
	tok := strings.TrimSpace(l.coffer("token", "create", "--user", "admin", "--grant", "/=Admin", "--lifetime", "1d"))
	if !strings.HasPrefix(tok, "coffer_") {
		l.t.Fatalf("token create printed %q", tok)
	}
	return tok
}

func unzip(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip (%d bytes): %v", len(b), err)
	}
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			out, _ := io.ReadAll(rc)
			return out
		}
	}
	t.Fatalf("the zip has no %s", name)
	return nil
}

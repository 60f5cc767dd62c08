package configcmd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// liveWait bounds how long a change may take to reach the other server:
// it polls the catalog every 2 s (service.DefaultConfigPoll); the bound
// only catches a change that never arrives on a loaded machine.
const liveWait = time.Minute

// TestEngineSettingsLiveAcrossServers: two `coffer server` processes on
// one PostgreSQL catalog. Limits, a latency-control entry, a resource
// group, a storage snapshot provider and a media library created and changed through the
// first server's API are in effect on the second without a restart: its
// engine's global pool takes the new task limit (its metrics), and its
// log says it reloaded each change's generation. The file's limits keys
// win, and both servers' `config get` says so; a latency-control entry
// that can measure nothing is refused with why.
func TestEngineSettingsLiveAcrossServers(t *testing.T) {
	dsn := testutil.StartPostgres(t)
	e := clitest.NewEnv(t)
	e.Vars["COFFER_CATALOG"] = dsn
	e.Must("init")
	e.Config(`
connections:
  - {name: lab, kind: fake, options: {seed: 3, vms: 2, hosts: 1, datastores: 1, disk-size: 64KiB}}
limits: {per-datastore: 5}
`)
	a, b := e.StartServer(), e.StartServer()
	tok := e.AdminToken()
	remote := func(s *clitest.ServerProc, want int, args ...string) string {
		t.Helper()
		code, out, errOut := e.Remote(s, tok, args...)
		if code != want {
			t.Fatalf("coffer %v through %s: exit %d, want %d\n%s%s", args, s.URL, code, want, out, errOut)
		}
		return out + errOut
	}
	spec := func(name, doc string) string {
		p := filepath.Join(e.Dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	globalSlots := regexp.MustCompile(`(?m)^coffer_limit_slots\{pool="global"\} (\d+)$`)
	slotsOn := func(s *clitest.ServerProc) string {
		if m := globalSlots.FindStringSubmatch(s.Metrics(tok)); m != nil {
			return m[1]
		}
		return ""
	}
	// waitFor polls cond until it holds and logs how long that took.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > liveWait {
				t.Fatalf("%s: not within %s\nserver B's log:\n%s", what, liveWait, b.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s: after %s", what, time.Since(start).Round(time.Millisecond))
	}
	waitFor("both engines run with the default 16 tasks", func() bool { return slotsOn(a) == "16" && slotsOn(b) == "16" })

	// Limits through A, in effect on B; the file's per-datastore wins.
	remote(a, 0, "config", "create", "limits", "-f", spec("limits.yaml", "tasks: 3\nper-datastore: 2\n"))
	waitFor("B's engine takes tasks: 3 created through A", func() bool { return slotsOn(b) == "3" })
	got := remote(b, 0, "config", "get", "limits", "default")
	if !strings.Contains(got, "tasks: 3") || !strings.Contains(got, "# warning: per-datastore: the configuration file sets it too") {
		t.Fatalf("config get limits through B:\n%s", got)
	}
	remote(a, 0, "config", "update", "limits", "default", "-f", spec("limits2.yaml", "tasks: 7\n"), "--if-version", "1")
	waitFor("B's engine takes tasks: 7 changed through A", func() bool { return slotsOn(b) == "7" })
	var show api.ConfigShow
	if err := json.Unmarshal([]byte(remote(b, 0, "config", "show", "--json")), &show); err != nil {
		t.Fatal(err)
	}
	var limits []string
	for _, o := range show.Objects {
		if o.Kind == "limits" {
			limits = append(limits, fmt.Sprintf("%s:%v", o.Source, o.FileKeys))
		}
	}
	if strings.Join(limits, " ") != "file:[] catalog:[]" {
		t.Fatalf("config show through B lists the limits as %v", limits)
	}

	// The named settings: each change is reloaded by B's engine.
	for _, c := range []struct{ kind, doc string }{
		{"latency-control", "name: ds\ndatastores: [ds-*]\nthreshold: 40ms\n"},
		{"resource-group", "name: array-a\ndatastores: [ds-*]\nlimit: 2\n"},
		{"storage-snapshot-provider", "name: xfs\nkind: reflink\nconnections: [lab]\ndatastores: [/srv/vms]\n"},
		{"media-library", "name: vtl9\nkind: vtl\ndirectory: " + filepath.Join(e.Dir, "vtl9") + "\n"},
	} {
		out := remote(a, 0, "config", "create", c.kind, "-f", spec(c.kind+".yaml", c.doc), "--json")
		var o api.ConfigObject
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatalf("%s: %v\n%s", c.kind, err, out)
		}
		var eff api.EffectiveConfig
		if err := json.Unmarshal([]byte(remote(a, 0, "config", "show", "--json")), &eff); err != nil {
			t.Fatal(err)
		}
		reloaded := regexp.MustCompile(fmt.Sprintf(`configuration reloaded.*generation=%d\b`, eff.Generation))
		waitFor("B reloads its engine with the "+c.kind+" created through A", func() bool { return reloaded.MatchString(b.Log()) })
		if out := remote(b, 0, "config", "list", c.kind); !strings.Contains(out, o.Name) || !strings.Contains(out, "catalog") {
			t.Fatalf("config list %s through B:\n%s", c.kind, out)
		}
	}

}

// TestLatencyControlThatMeasuresNothing: with only a vSphere connection
// (whose disk latency coffer does not read yet), an entry naming
// datastores that are no directories can measure nothing: the file's is
// refused by policy check, and one created through the API by config
// create, both saying why; one naming a directory is taken.
func TestLatencyControlThatMeasuresNothing(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(`
connections:
  - {name: vc, kind: vsphere, options: {url: "https://vc/sdk", user: u, password-file: /p}}
latency-control:
  - {datastores: [san-*]}
`)
	const why = "latency-control entry 1: it can measure nothing: its datastores [san-*] are not directories of a host"
	if out := e.Expect(2, "policy", "check"); !strings.Contains(out, why) || !strings.Contains(out, "vc (vsphere)") {
		t.Fatalf("policy check of the file's entry:\n%s", out)
	}
	e.Config(`
connections:
  - {name: vc, kind: vsphere, options: {url: "https://vc/sdk", user: u, password-file: /p}}
`)
	bad := filepath.Join(e.Dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: san\ndatastores: [san-*]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.Expect(2, "config", "create", "latency-control", "-f", bad); !strings.Contains(out, "latency-control san: it can measure nothing") {
		t.Fatalf("config create of an entry that measures nothing:\n%s", out)
	}
	good := filepath.Join(e.Dir, "good.yaml")
	if err := os.WriteFile(good, []byte("name: vms\ndatastores: [/srv/vms]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Must("config", "create", "latency-control", "-f", good)
}

package configcmd_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"

	"github.com/coffer-backup/coffer/internal/config"
)

// expectAll runs coffer, wants the exit code, and wants every string in
// its output.
func expectAll(e *clitest.Env, code int, wants []string, args ...string) string {
	e.T.Helper()
	out := e.Expect(code, args...)
	for _, w := range wants {
		if !strings.Contains(out, w) {
			e.T.Errorf("coffer %v: output lacks %q:\n%s", args, w, out)
		}
	}
	return out
}

// TestEverySectionIsStrict: an unknown key in any section of the
// configuration file is an error naming it, for every command, not only
// for the command that uses the section; no section is accepted and
// ignored.
func TestEverySectionIsStrict(t *testing.T) {
	e := clitest.NewEnv(t)
	typos := map[string]struct{ doc, want string }{
		"connections":       {"connections: [{name: a, kind: fake, optoins: {}}]\n", `unknown key "optoins" in connections[0] (did you mean "options"?)`},
		"repositories":      {"repositories: [{name: a, locaton: /x}]\n", `unknown key "locaton" in repositories[0] (did you mean "location"?)`},
		"policies":          {"policies: [{name: a, conection: x}]\n", `unknown key "conection" in policies[0] (did you mean "connection"?)`},
		"server":            {"server:\n  lisen: \":8080\"\n", `line 2: unknown key "lisen" in server (did you mean "listen"?)`},
		"limits":            {"limits: {task: 3}\n", `unknown key "task" in limits (did you mean "tasks"?)`},
		"resource-groups":   {"resource-groups: [{name: g, limt: 2}]\n", `unknown key "limt" in resource-groups[0] (did you mean "limit"?)`},
		"storage-snapshots": {"storage-snapshots:\n  - {name: a, kind: reflink, datastores: [/x], conections: [a]}\n", `unknown key "conections" in storage-snapshots[0] (did you mean "connections"?)`},
		"media-libraries":   {"media-libraries: [{name: v, kind: vtl, directroy: /srv/vtl}]\n", `unknown key "directroy" in media-libraries[0] (did you mean "directory"?)`},
		"maintenance":       {"maintenance:\n  takeover-afterr: 10s\n", `unknown key "takeover-afterr" in maintenance (did you mean "takeover-after"?)`},
		"latency-control":   {"latency-control:\n  - {datastores: [/x], threshhold: 20ms}\n", `unknown key "threshhold" in latency-control[0] (did you mean "threshold"?)`},
		"replications":      {"replications: [{name: dr, repositry: r}]\n", `unknown key "repositry" in replications[0] (did you mean "repository"?)`},
		"failover-plans":    {"failover-plans: [{name: p, groups: [{vms: [{name: a, scrpt: /x}]}]}]\n", `unknown key "scrpt" in failover-plans[0].groups[0].vms[0] (did you mean "script"?)`},
		"realms":            {"realms: [{name: corp, type: ldap, user-bsae: ou=people}]\n", `unknown key "user-bsae" in realms[0] (did you mean "user-base"?)`},
		"notifications":     {"notifications:\n  targets: [{name: a, webhook: {url: 'https://x', secret-fle: /s}}]\n", `unknown key "secret-fle" in notifications.targets[0].webhook (did you mean "secret-file"?)`},
	}
	for _, s := range config.Sections {
		c, ok := typos[s]
		if !ok {
			t.Errorf("section %s has no case here: add one", s)
			continue
		}
		e.Config(c.doc)
		expectAll(e, command.ExitUsage, []string{"section " + s + ": ", c.want}, "config", "show")
	}
	if len(typos) != len(config.Sections) {
		t.Errorf("%d cases for %d sections", len(typos), len(config.Sections))
	}
	// A setting of the top level written inside server: is named as such.
	e.Config("server:\n  log-format: json\n")
	expectAll(e, command.ExitUsage, []string{`unknown key "log-format" in server (log-format is a top-level key`}, "policy", "check", "--offline")
	// Empty sections are fine.
	e.Config("server:\nstorage-snapshots: []\n")
	e.Must("config", "show")
}

// TestServerAndStorageSectionsRefusedByTheirCommands: the commands that
// would use the sections refuse them with exit 2 and the message.
func TestServerAndStorageSectionsRefusedByTheirCommands(t *testing.T) {
	e := clitest.NewEnv(t)
	base := "connections: [{name: lab, kind: fake, options: {vms: 2}}]\npolicies: [{name: p, connection: lab, schedule: '@daily'}]\n"
	e.Config(base + "server: {listen: ':8080', metrics: true}\n")
	want := []string{`unknown key "metrics" in server`}
	expectAll(e, command.ExitUsage, want, "policy", "check")
	serverRefuses(t, e, want)
	e.Config(base + "storage-snapshots:\n  - {name: z, kind: zfs, connections: [lab], datastores: [/tank]}\n")
	want = []string{`storage-snapshots z: kind: "zfs" is not one of reflink, btrfs, exec`}
	expectAll(e, command.ExitUsage, want, "policy", "check")
	expectAll(e, command.ExitUsage, want, "run", "p")
	serverRefuses(t, e, want)
}

// TestGroupDatastoreWithoutProviderRefused: group: datastore on a
// connection without a storage snapshot provider (every real one in this
// configuration) is refused by policy check, run and server with exit 2 and a
// message naming the policy and what to do, instead of running VM by VM.
func TestGroupDatastoreWithoutProviderRefused(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(`
connections:
  - {name: kvm, kind: qemu, options: {sockets: ["` + e.Dir + `/none/*.qmp"]}}
  - {name: sim, kind: fake, options: {vms: 4, datastores: 2, disk-size: 128KiB}}
policies:
  - {name: flash, connection: kvm, group: datastore, schedule: "@daily"}
  - {name: sim-flash, connection: sim, group: datastore}
`)
	want := []string{"policy flash: group: datastore needs a storage snapshot provider, and connection kvm (qemu) has none",
		"add a storage-snapshots entry (kind reflink, btrfs or exec) naming connection kvm", "Or remove `group: datastore` from the policy"}
	out := expectAll(e, command.ExitUsage, want, "policy", "check", "--offline")
	if strings.Contains(out, "sim-flash") {
		t.Errorf("the fake connection's simulated array was refused:\n%s", out)
	}
	expectAll(e, command.ExitUsage, want, "policy", "check")
	expectAll(e, command.ExitUsage, want, "run", "flash")
	// The other policy is refused too: the configuration is, as a whole.
	expectAll(e, command.ExitUsage, want, "run", "sim-flash")
	serverRefuses(t, e, want)

	// Without the qemu policy, the simulated array serves group: datastore.
	e.Config(`
connections: [{name: sim, kind: fake, options: {vms: 4, datastores: 2, disk-size: 128KiB}}]
policies: [{name: sim-flash, connection: sim, group: datastore}]
`)
	expectAll(e, 0, []string{"read from one storage snapshot per datastore"}, "policy", "check", "--offline")
	var res api.Job
	if err := json.Unmarshal([]byte(e.Must("run", "sim-flash", "--json")), &res); err != nil || res.Status != "success" {
		t.Fatalf("run sim-flash: %+v %v", res, err)
	}
}

// serverRefuses runs `coffer server` as a process and wants exit 2 with
// the messages. The bound only catches a server that starts instead of
// refusing (it would run until stopped).
func serverRefuses(t *testing.T, e *clitest.Env, want []string) {
	t.Helper()
	cmd := e.Child("server", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(e.Dir, "server-state"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != command.ExitUsage {
			t.Fatalf("server: %v, want exit %d\n%s", err, command.ExitUsage, out.String())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("server started instead of refusing the configuration:\n%s", out.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("server output lacks %q:\n%s", w, out.String())
		}
	}
}

// TestPolicyCheckSaysWhatWillHappen: settings a connector cannot honour
// are errors, settings that run differently from how they read are
// warnings naming the VMs concerned, and a run does what the warning said.
func TestPolicyCheckSaysWhatWillHappen(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	fleet := "connections: [{name: sim, kind: fake, options: {seed: 3, vms: 4, hosts: 1, datastores: 1, disk-size: 128KiB}}]\n"

	e.Config(fleet + "policies: [{name: mem, connection: sim, snapshot: with-memory}]\n")
	expectAll(e, command.ExitUsage, []string{"policy mem: snapshot: with-memory is not possible on connection sim (fake)"}, "policy", "check", "--offline")

	e.Config(fleet + `policies:
  - {name: live, connection: sim, snapshot: as-is}
  - {name: calm, connection: sim, snapshot: quiesced}
  - {name: odd, connection: sim, quiesce: fallback}
`)
	expectAll(e, 0, []string{
		"warning: policy live: snapshot: as-is takes no snapshot",
		"warning: policy live on sim: 4 selected VMs are running and would fail with snapshot: as-is",
		// The fake fleet's every fourth VM has no guest agent.
		"warning: policy calm on sim: 1 selected VM has no guest agent running, so snapshots will be crash-consistent (quiesce: fallback): cache-0003",
		"warning: policy odd: quiesce: fallback only applies with snapshot: quiesced; with crash-consistent it is ignored",
	}, "policy", "check")
	var doc struct {
		Policies []api.PolicyReport `json:"policies"`
	}
	if err := json.Unmarshal([]byte(e.Must("policy", "check", "--json")), &doc); err != nil || len(doc.Policies) != 3 || len(doc.Policies[0].Warnings) != 2 {
		t.Fatalf("policy check --json: %+v %v", doc, err)
	}
	// The run does what the warning said: every running VM fails, none is
	// read live.
	var res api.Job
	code, out, _ := e.Run("run", "live", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != command.ExitFailure || err != nil || len(res.Tasks) != 4 {
		t.Fatalf("run live: exit %d, %+v %v", code, res, err)
	}
	for _, tk := range res.Tasks {
		if tk.Status != "failed" || !strings.Contains(tk.Error, "is running and snapshot: as-is takes no snapshot") {
			t.Errorf("%s: %s %s", tk.VM, tk.Status, tk.Error)
		}
	}
}

// TestConnectionOptionsCheckedWithoutConnecting: the options of every
// connection are checked when the configuration is loaded, also offline
// and for connections no policy uses, and all problems are reported at
// once.
func TestConnectionOptionsCheckedWithoutConnecting(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Config(`
connections:
  - {name: kvm, kind: qemu, options: {host: kvm1, nbd-connections: -1}}
  - {name: vc, kind: vsphere, options: {url: "https://vc/sdk", user: u, password-file: /p, insecure: true, ca-file: /ca.pem}}
  - {name: vc2, kind: vsphere, options: {url: "https://vc/sdk", user: u, pasword-file: /p}}
  - {name: lv, kind: libvirt, options: {uri: "kvm2", socket: /run/x}}
  - {name: lv2, kind: libvirt, options: {uri: "not a uri"}}
  - {name: far, kind: hyperv}
  - {name: kvm3, kind: qemu, options: {sockets: [/run/x.qmp], unused-chain-expiry: 2 weeks}}
  - {name: lv3, kind: libvirt, options: {unused-chain-expiry: never}}
`)
	out := expectAll(e, command.ExitUsage, []string{
		"connection kvm: options.sockets lists no QMP sockets",
		"connection vc: options insecure and ca-file contradict each other",
		`connection vc2: line 5: unknown key "pasword-file" in connections.vc2.options (did you mean "password-file"?)`,
		`connection lv: line 6: unknown key "socket" in connections.lv.options`,
		`connection lv2: options.uri "not a uri" is not a libvirt URI`,
		`connection far: this build of coffer has no "hyperv" connector (known: fake, fake-kvm, libvirt, qemu, vsphere)`,
		`connection kvm3: options.unused-chain-expiry "2 weeks" is not a duration (like 35d or 72h) or "never"`,
	}, "policy", "check", "--offline")
	if strings.Contains(out, "connection lv3") { // "never" is a valid expiry
		t.Errorf("a valid connection reported:\n%s", out)
	}
}

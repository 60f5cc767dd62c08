package policy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

const sample = `
connections:
  - name: lab
    kind: fake
    options: {vms: 10}
repositories:
  - name: main
    location: /srv/coffer
    streams: 4
limits:
  tasks: 32
  per-host: 4
  rate: 200MiB/s
  task-rate: 50MiB
resource-groups:
  - name: ctrl-a
    datastores: [ssd-*]
    limit: 4
policies:
  - name: nightly
    connection: lab
    repository: main
    select: {names: ["web-*", db-01], tags: {env: prod}}
    exclude: {names: ["web-test-*"], tags: {backup: "no"}}
    mode: incremental
    full-every: 7
    full-on: [Sunday]
    snapshot: quiesced
    quiesce: required
    schedule: "0 22 * * *"
    retention: {keep-daily: 14, keep-weekly: 8}
    timeouts: {vm: 4h, snapshot-create: 10m}
    retries: {attempts: 5, backoff: 1m}
    immutable-for: 30d
`

func load(t *testing.T, doc string) (*Config, error) {
	t.Helper()
	f, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return Load(f)
}

func TestLoadSample(t *testing.T) {
	c, err := load(t, sample)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.Policy("nightly")
	if !ok || p.FullEvery != 7 || p.Timeouts.VM != 4*time.Hour || p.Retries.Attempts != 5 || p.Retention.Daily != 14 || p.ImmutableFor != Duration(30*24*time.Hour) {
		t.Fatalf("policy = %+v", p)
	}
	at := time.Date(2026, 3, 1, 22, 0, 0, 500, time.UTC)
	if got := p.RetainUntil(at); !got.Equal(time.Date(2026, 3, 31, 22, 0, 1, 0, time.UTC)) {
		t.Fatalf("a point backed up at %v is locked until %v, want 30 days later rounded up to the second", at, got)
	}
	if got := (Policy{}).RetainUntil(at); !got.IsZero() {
		t.Fatalf("without immutable-for a point is locked until %v", got)
	}
	if c.Limits.Rate != 200<<20 || c.Limits.TaskRate != 50<<20 || c.Limits.WithDefaults().PerDatastore != 8 {
		t.Fatalf("limits = %+v", c.Limits)
	}
	var opts struct {
		VMs int `yaml:"vms"`
	}
	if err := c.Connections[0].DecodeOptions(&opts); err != nil || opts.VMs != 10 {
		t.Fatalf("options = %+v, %v", opts, err)
	}
	var wrong struct {
		Hosts int `yaml:"hosts"`
	}
	if err := c.Connections[0].DecodeOptions(&wrong); err == nil || !strings.Contains(err.Error(), `unknown key "vms"`) {
		t.Fatalf("unknown option accepted: %v", err)
	}
}

func TestValidationErrors(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"unknown key", "policies:\n  - name: a\n    connection: x\n    scheduel: '@daily'\n", `unknown key "scheduel" in policies[0] (did you mean "schedule"?)`},
		{"bad cron", "connections: [{name: x, kind: fake}]\npolicies:\n  - name: a\n    connection: x\n    schedule: '61 * * * *'\n", `policy a: schedule "61 * * * *"`},
		{"bad glob", "connections: [{name: x, kind: fake}]\npolicies:\n  - name: a\n    connection: x\n    select: {names: ['web-[']}\n", `policy a: select.names: bad pattern "web-["`},
		{"unknown connection", "policies:\n  - name: a\n    connection: nope\n", `policy a: unknown connection "nope" (none is configured)`},
		{"unknown repository", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, repository: r}\n", `unknown repository "r"`},
		{"bad mode", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, mode: weekly}\n", `policy a: mode: "weekly" is not one of incremental, differential, full`},
		{"bad weekday", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, full-on: [caturday]}\n", `"caturday" is not a weekday`},
		{"required without quiesced", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, quiesce: required}\n", "quiesce: required only applies"},
		{"duplicate", "connections: [{name: x, kind: fake}, {name: x, kind: fake}]\n", "connection x is defined twice"},
		{"group limit", "resource-groups: [{name: g, datastores: [a]}]\n", "resource group g: limit must be at least 1"},
		{"bad rate", "limits: {rate: fast}\n", `"fast" is not a byte rate`},
		{"negative", "limits: {tasks: -1}\n", "limits.tasks must not be negative"},
		{"negative boot verifications", "limits: {boot-verifications: -1}\n", "limits.boot-verifications must not be negative"},
		{"repository named default", "repositories: [{name: default, location: /srv/r}]\n", "repository default: the name means the repository of the repository setting"},
		{"bad immutable-for", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, immutable-for: a month}\n", `line 3: "a month" is not a duration (like 30d, 1d12h or 72h)`},
		{"negative immutable-for", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, immutable-for: -2d}\n", `"-2d" is not a duration`},
		{"policy tag", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, tags: {policy: b}}\n", `policy a: tags: policy ("b") is set by coffer`},
		{"storage provider", "storage-snapshots:\n  - {name: array, kind: flashcopy}\n", `storage-snapshots array: kind: "flashcopy" is not one of reflink, btrfs, exec`},
		{"hook place", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, hooks: [{name: db, where: vm, pre: [/bin/true]}]}\n", `policy a: hook db: where: "vm" is not guest (through the guest agent) or host (the backup host)`},
		{"hook without command", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, hooks: [{where: host}]}\n", `policy a: hooks[0]: neither pre nor post gives a command`},
		{"hook as a string", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, hooks: [{where: host, pre: /bin/true}]}\n", `line 3: a hook command is a list, program first: ["/bin/true"] (for a shell line: [/bin/sh, -c, "/bin/true"])`},
		{"hook failure", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, hooks: [{where: host, pre: [/bin/true], on-failure: abort}]}\n", `policy a: hooks[0]: on-failure: "abort" is not one of continue, fail`},
		{"hook vms", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, hooks: [{where: host, pre: [/bin/true], vms: ['db-[']}]}\n", `policy a: hooks[0]: vms: bad pattern "db-["`},
		{"hooks in group mode", "connections: [{name: x, kind: fake}]\npolicies:\n  - {name: a, connection: x, group: datastore, hooks: [{where: host, pre: [/bin/true]}]}\n", "policy a: hooks are not run with group: datastore"},
	} {
		_, err := load(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v\nwant %s", c.name, err, c.want)
		}
	}
}

// TestHooksFor: a hook without vms runs for every VM of the policy, one
// with globs only for the VMs they match, in the policy's order.
func TestHooksFor(t *testing.T) {
	c, err := load(t, `connections: [{name: x, kind: fake}]
policies:
  - name: a
    connection: x
    hooks:
      - {name: all, where: host, pre: [/bin/true]}
      - {name: db, where: guest, vms: ["db-*", "pg"], post: [/usr/bin/resume], timeout: 30s, on-failure: fail}
`)
	if err != nil {
		t.Fatal(err)
	}
	names := func(vm string) (out []string) {
		for _, h := range c.Policies[0].HooksFor(vm) {
			out = append(out, h.Name)
		}
		return out
	}
	if got := names("db-1"); len(got) != 2 || got[0] != "all" || got[1] != "db" {
		t.Fatalf("hooks for db-1: %v", got)
	}
	if got := names("web-1"); len(got) != 1 || got[0] != "all" {
		t.Fatalf("hooks for web-1: %v", got)
	}
	if h := c.Policies[0].Hooks[1]; h.Timeout != Duration(30*time.Second) || h.OnFailure != HookFail {
		t.Fatalf("hook read as %+v", h)
	}
}

// TestStorageSnapshotsSection: providers are declared per connection and
// datastore directory; every mistake is refused with what to write.
func TestStorageSnapshotsSection(t *testing.T) {
	for _, doc := range []string{"", "storage-snapshots:\n", "storage-snapshots: []\n", "storage-snapshots: ~\n"} {
		c, err := load(t, doc)
		if err != nil {
			t.Errorf("%q: %v", doc, err)
			continue
		}
		if c.StorageSnapshots.HasProvider("lab") {
			t.Errorf("%q: a provider without any entry", doc)
		}
	}
	c, err := load(t, "connections: [{name: lab, kind: fake}, {name: other, kind: fake}]\n"+
		"policies: [{name: p, connection: lab, group: datastore, storage-fallback: vm}]\n"+
		"storage-snapshots:\n  - {name: xfs, kind: reflink, connections: [lab], datastores: [/srv/vms]}\n"+
		"  - {name: fast, kind: btrfs, connections: [lab], datastores: [/srv/vms/fast]}\n")
	if err != nil {
		t.Fatal(err)
	}
	ss := c.StorageSnapshots
	if !ss.HasProvider("lab") || ss.HasProvider("other") {
		t.Fatal("HasProvider does not follow connections")
	}
	for ds, want := range map[string]string{"/srv/vms": "xfs", "/srv/vms/web": "xfs", "/srv/vms/fast/db": "fast", "/srv/vmsx": "", "/srv": ""} {
		p, _, ok := ss.Provider("lab", ds)
		if (want == "") == ok || p.Name != want {
			t.Errorf("datastore %s: provider %q (%v), want %q", ds, p.Name, ok, want)
		}
	}
	if _, _, ok := ss.Provider("other", "/srv/vms"); ok {
		t.Error("a provider covers a connection it does not name")
	}
	base := "connections: [{name: lab, kind: fake}]\n"
	for doc, want := range map[string]string{
		"storage-snapshots:\n  - {name: a, kind: reflink, connections: [lab], datastores: [/x], conections: [a]}\n": `unknown key "conections" in storage-snapshots[0]`,
		"storage-snapshots:\n  - {name: a, kind: zfs, connections: [lab], datastores: [/x]}\n":                      `storage-snapshots a: kind: "zfs" is not one of reflink, btrfs, exec`,
		"storage-snapshots:\n  - {name: a, connections: [lab], datastores: [/x]}\n":                                 "storage-snapshots a: kind is missing",
		"storage-snapshots:\n  - {name: a, kind: exec, connections: [lab], datastores: [/x]}\n":                     "storage-snapshots a: command is missing",
		"storage-snapshots:\n  - {name: a, kind: reflink, connections: [lab], datastores: [/x], command: [x]}\n":    "command only applies to kind: exec",
		"storage-snapshots:\n  - {name: a, kind: btrfs, connections: [lab], datastores: [/x], changes: true}\n":     "changes only applies to kind: exec",
		"storage-snapshots:\n  - {name: a, kind: reflink, connections: [lab], datastores: [vms]}\n":                 `datastores: "vms" is not an absolute directory`,
		"storage-snapshots:\n  - {name: a, kind: reflink, connections: [nope], datastores: [/x]}\n":                 `storage-snapshots a: unknown connection "nope"`,
		"storage-snapshots:\n  - {name: a, kind: reflink, connections: [lab]}\n":                                    "storage-snapshots a: datastores is missing",
		"storage-snapshots:\n  - {name: a, kind: reflink, datastores: [/x]}\n":                                      "storage-snapshots a: connections is missing",
		"policies: [{name: p, connection: lab, storage-fallback: vm}]\n":                                            "storage-fallback only applies with group: datastore",
		"policies: [{name: p, connection: lab, group: datastore, storage-fallback: maybe}]\n":                       `storage-fallback: "maybe" is not one of fail, vm`,
		"storage-snapshots: {zfs: {pool: tank}}\n":                                                                  "storage-snapshots",
	} {
		if _, err := load(t, base+doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v\nwant %s", doc, err, want)
		}
	}
}

func vm(name, host string, ds []string, tags map[string]string) hypervisor.VM {
	return hypervisor.VM{VMRef: hypervisor.VMRef{ID: name, Name: name}, Host: host, Datastores: ds, Tags: tags}
}

func TestSelection(t *testing.T) {
	prod := map[string]string{"env": "prod"}
	vms := []hypervisor.VM{
		vm("web-01", "h1", []string{"ssd-1"}, prod),
		vm("web-test-01", "h1", []string{"ssd-1"}, prod),
		vm("web-02", "h2", []string{"hdd-1"}, map[string]string{"env": "dev"}),
		vm("db-01", "h2", []string{"hdd-1", "ssd-2"}, prod),
		vm("db-02", "h2", []string{"hdd-1"}, map[string]string{"env": "prod", "backup": "no"}),
		vm("mail", "h3", []string{"nfs"}, nil),
	}
	for _, c := range []struct {
		name string
		p    Policy
		want string
	}{
		{"all", Policy{}, "web-01 web-test-01 web-02 db-01 db-02 mail"},
		{"glob and exact", Policy{Select: Selector{Names: []string{"web-*", "mail"}}}, "web-01 web-test-01 web-02 mail"},
		{"tag", Policy{Select: Selector{Tags: map[string]string{"env": "prod"}}}, "web-01 web-test-01 db-01 db-02"},
		{"tag glob", Policy{Select: Selector{Tags: map[string]string{"env": "p*"}}}, "web-01 web-test-01 db-01 db-02"},
		{"host", Policy{Select: Selector{Hosts: []string{"h2"}}}, "web-02 db-01 db-02"},
		{"datastore any disk", Policy{Select: Selector{Datastores: []string{"ssd-*"}}}, "web-01 web-test-01 db-01"},
		{"criteria combine with AND", Policy{Select: Selector{Names: []string{"web-*"}, Tags: map[string]string{"env": "prod"}}}, "web-01 web-test-01"},
		{"exclusions with OR", Policy{Select: Selector{Tags: map[string]string{"env": "prod"}},
			Exclude: Selector{Names: []string{"web-test-*"}, Tags: map[string]string{"backup": "no"}}}, "web-01 db-01"},
		{"exclude datastore", Policy{Exclude: Selector{Datastores: []string{"hdd-*"}}}, "web-01 web-test-01 mail"},
	} {
		var got []string
		for _, v := range c.p.SelectVMs(vms) {
			got = append(got, v.Name)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: selected %v, want %s", c.name, got, c.want)
		}
	}
	cfg := &Config{ResourceGroups: []ResourceGroup{{Name: "ssd", Datastores: []string{"ssd-*"}, Limit: 2}, {Name: "h3", Hosts: []string{"h3"}, Limit: 1}}}
	if g := cfg.Groups(vms[3]); len(g) != 1 || g[0] != "ssd" {
		t.Errorf("groups of db-01 = %v", g)
	}
	if g := cfg.Groups(vms[5]); len(g) != 1 || g[0] != "h3" {
		t.Errorf("groups of mail = %v", g)
	}
}

func TestPeriodicFull(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 22, 0, 0, 0, time.UTC) } // Nov 1 2026 is a Sunday
	hist := func(modes ...string) []Point {
		var out []Point
		for i, m := range modes {
			out = append(out, Point{Time: day(2 + i), Mode: m})
		}
		return out
	}
	every7 := Policy{FullEvery: 7}
	for _, c := range []struct {
		name string
		p    Policy
		now  time.Time
		h    []Point
		want string
	}{
		{"first run", Policy{}, day(2), nil, "full"},
		{"plain incremental", Policy{}, day(5), hist("full", "incremental"), "incremental"},
		{"differential", Policy{Mode: "differential"}, day(5), hist("full", "differential"), "differential"},
		{"mode full", Policy{Mode: "full"}, day(5), hist("full"), "full"},
		{"every 7th: 5 since full", every7, day(10), hist("full", "incremental", "incremental", "incremental", "incremental", "incremental"), "incremental"},
		{"every 7th: 6 since full", every7, day(10), hist("full", "incremental", "incremental", "incremental", "incremental", "incremental", "incremental"), "full"},
		{"every 7th: restarts after a full", every7, day(12), hist("full", "incremental", "incremental", "incremental", "incremental", "incremental", "incremental", "full"), "incremental"},
		{"every 1st", Policy{FullEvery: 1}, day(5), hist("full"), "full"},
		{"sunday", Policy{FullOn: []string{"sun"}}, day(8), hist("full", "incremental"), "full"},
		{"monday is not sunday", Policy{FullOn: []string{"sunday"}}, day(9), hist("full", "incremental"), "incremental"},
		{"second sunday run", Policy{FullOn: []string{"Sunday"}}, day(8).Add(time.Hour), []Point{{day(2), "full"}, {day(8), "full"}}, "incremental"},
	} {
		got, why := c.p.ModeFor(c.now, c.h)
		if got != c.want {
			t.Errorf("%s: mode %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}

func TestByteRate(t *testing.T) {
	for in, want := range map[string]ByteRate{"200MiB/s": 200 << 20, "1.5GB/s": 1.5e9, "50MB": 50e6, "1024": 1024, "10 KiB/s": 10 << 10, "2GIB/S": 2 << 30} {
		if got, err := ParseByteRate(in); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "-1MB", "M", "50M", "1.5B/s"} {
		if _, err := ParseByteRate(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseByteRate(f *testing.F) {
	for _, s := range []string{"200MiB/s", "1.5GB/s", "1e3k", "NaN", "Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := ParseByteRate(s); err == nil && r < 0 {
			t.Fatalf("%q parsed to negative %d", s, r)
		}
	})
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "1d12h": 36 * time.Hour, "72h": 72 * time.Hour, "90m": 90 * time.Minute, "0d": 0} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "1w", "x1d", "1d-"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("%q parsed as %v", in, got)
		}
	}
}

// TestDurationRoundTrips: a duration written back (YAML or JSON, by the
// API or config show) reads again to the same value.
func TestDurationRoundTrips(t *testing.T) {
	for _, in := range []string{"30d", "1d12h", "72h", "90m", "0s"} {
		v, err := ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := yaml.Marshal(Duration(v))
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := yaml.Unmarshal(out, &back); err != nil || time.Duration(back) != v {
			t.Fatalf("%s -> %s -> %v (%v)", in, out, time.Duration(back), err)
		}
		js, _ := json.Marshal(Duration(v))
		var fromJSON Duration
		if err := json.Unmarshal(js, &fromJSON); err != nil || time.Duration(fromJSON) != v {
			t.Fatalf("%s -> %s -> %v (%v)", in, js, time.Duration(fromJSON), err)
		}
	}
}

// TestRPOIsValidated: an RPO shorter than the gap between scheduled runs,
// or under a minute, is refused with what to write instead.
func TestRPOIsValidated(t *testing.T) {
	c := &Config{Connections: []Connection{{Name: "lab", Kind: "fake"}},
		Policies: []Policy{
			{Name: "ok", Connection: "lab", Schedule: "0 22 * * *", RPO: Duration(26 * time.Hour)},
			{Name: "short", Connection: "lab", Schedule: "0 22 * * *", RPO: Duration(12 * time.Hour)},
			{Name: "tiny", Connection: "lab", RPO: Duration(time.Second)},
		}}
	err := c.Validate()
	if err == nil {
		t.Fatal("bad RPOs accepted")
	}
	for _, want := range []string{"policy short: rpo 12h0m0s is shorter than the longest time between two scheduled runs (1d)",
		"policy tiny: rpo 1s is less than a minute"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "policy ok") {
		t.Errorf("a good RPO refused: %v", err)
	}
}

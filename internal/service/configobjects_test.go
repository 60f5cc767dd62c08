package service_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/configops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/planops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// confCatalog is the catalog of a test: a SQLite file by default, a
// PostgreSQL schema while TestConfigObjectsOnPostgres runs the tests
// again.
var confCatalog = func(t *testing.T, dir string) string { return filepath.Join(dir, "catalog.db") }

// TestConfigObjectsOnPostgres runs the tests of configuration objects
// again over PostgreSQL (the catalog several servers share), one schema
// per test.
func TestConfigObjectsOnPostgres(t *testing.T) {
	onPostgres(t, map[string]func(*testing.T){
		"Lifecycle":              TestConfigObjectLifecycle,
		"FileMessages":           TestConfigObjectsFailWithTheFilesMessages,
		"FileWins":               TestConfigFileWins,
		"StaleVersions":          TestConfigStaleVersionsConflict,
		"ConcurrentChanges":      TestConfigChangesAreSerialised,
		"SurviveRestart":         TestConfigObjectsSurviveRestart,
		"AuditWithoutSecrets":    TestConfigChangesAuditedWithoutSecrets,
		"WatchSeesChanges":       TestWatchConfigSeesChanges,
		"PreviewDraft":           TestPolicyPreviewOfADraft,
		"SchedulesReloadChanges": TestSchedulesReloadChanges,
		"ServerReloadWhole":      TestServerReloadKeepsClaimsMonitorAndNotifier,
	})
}

// onPostgres runs tests of confEnv again with their catalogs in a
// PostgreSQL server, one schema per test.
func onPostgres(t *testing.T, tests map[string]func(*testing.T)) {
	server := testutil.StartPostgres(t)
	var seq atomic.Int64
	sqliteCatalog := confCatalog
	confCatalog = func(t *testing.T, _ string) string {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		schema := fmt.Sprintf("c%d", seq.Add(1))
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		return server + "&search_path=" + schema
	}
	defer func() { confCatalog = sqliteCatalog }()
	for name, test := range tests {
		t.Run(name, test)
	}
}

// confEnv is a configuration file and a catalog that services are opened
// on, as servers or restarts of one would be.
type confEnv struct {
	t       *testing.T
	dir     string
	catalog string
	file    string
	ctx     context.Context // acting as alice
	poll    time.Duration   // ConfigPoll of the services
}

const confFile = "/etc/coffer/coffer.yaml"

func newConfEnv(t *testing.T, file string) *confEnv {
	t.Helper()
	servicetest.RegisterFake()
	dir := t.TempDir()
	e := &confEnv{t: t, dir: dir, catalog: confCatalog(t, dir), file: file,
		ctx: auth.WithSubject(context.Background(), &auth.Subject{User: "alice"})}
	return e
}

// service opens a new Service on the environment's file and catalog;
// with tweaks applied to its configuration.
func (e *confEnv) service(tweaks ...func(*service.Config)) *service.Service {
	e.t.Helper()
	f, err := config.Parse([]byte(e.file))
	if err != nil {
		e.t.Fatal(err)
	}
	eng, err := policy.Decode(f)
	if err != nil {
		e.t.Fatal(err)
	}
	nc, err := notify.Decode(f)
	if err != nil {
		e.t.Fatal(err)
	}
	mc, err := maintenance.Decode(f)
	if err != nil {
		e.t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	cfg := service.Config{Repository: service.Location{Location: filepath.Join(e.dir, "repo"), Password: pw},
		Catalog: e.catalog, StateDir: filepath.Join(e.dir, "state"), Engine: eng, Notify: nc, Maintenance: mc,
		EngineSource: confFile, ConfigPoll: e.poll}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	return operations.New(cfg)
}

// secretFile writes a secret into a file of the environment.
func (e *confEnv) secretFile(name, secret string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// spec reads an object written as the configuration file's entry.
func spec(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func wantClass(t *testing.T, what string, err error, class api.Class, msg string) {
	t.Helper()
	if service.Classify(err) != class || !strings.Contains(fmt.Sprint(err), msg) {
		t.Fatalf("%s: %v (class %s)\nwant class %s and %q", what, err, service.Classify(err), class, msg)
	}
}

const labSpec = `{name: lab, kind: fake, options: {seed: 3, vms: 4, hosts: 1, datastores: 1, disk-size: 128KiB}}`

// TestConfigObjectLifecycle: every kind of object is created, read,
// listed, changed and deleted through the service, each change giving a
// new version; deleting what others use is refused naming them.
func TestConfigObjectLifecycle(t *testing.T) {
	e := newConfEnv(t, "")
	s, ctx := e.service(), e.ctx
	create := func(kind, doc string) *api.ConfigObject {
		t.Helper()
		o, err := servicetest.CreateObject(ctx, s, kind, spec(t, doc))
		if err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
		if o.Source != "catalog" || o.CreatedBy != "alice" || o.UpdatedBy != "alice" || o.CreatedAt.IsZero() || o.Version == 0 {
			t.Fatalf("created %s: %+v", kind, o)
		}
		return o
	}
	pwFile := e.secretFile("main.pw", "repository password")
	create("connection", labSpec)
	create("repository", fmt.Sprintf(`{name: main, location: %s, password-file: %s}`, filepath.Join(e.dir, "main"), pwFile))
	nightly := create("policy", `{name: nightly, connection: lab, repository: main, schedule: "0 22 * * *", retention: {keep-daily: 7}}`)
	create("notification-target", fmt.Sprintf(`{name: chat, webhook: {url: "https://hooks.example.com/x", secret-file: %s}}`,
		e.secretFile("hook.secret", "hook secret")))
	matcher := create("notification-matcher", `{name: failures, targets: [chat], types: [task-failed]}`)

	got, err := servicetest.GetObject(ctx, s, "policies", "nightly")
	if err != nil || got.Version != nightly.Version || got.Spec["schedule"] != "0 22 * * *" || len(got.Warnings) != 0 {
		t.Fatalf("get: %+v %v", got, err)
	}
	all, err := servicetest.ListObjects(ctx, s, "")
	if err != nil || len(all) != 5 {
		t.Fatalf("list: %d objects, %v", len(all), err)
	}
	if ps, err := servicetest.ListObjects(ctx, s, "policy"); err != nil || len(ps) != 1 || ps[0].Name != "nightly" {
		t.Fatalf("list policies: %+v %v", ps, err)
	}

	upd, err := servicetest.UpdateObject(ctx, s, "policy", "nightly", spec(t, `{connection: lab, repository: main, schedule: "@hourly", retention: {keep-last: 3}}`), nightly.Version)
	if err != nil || upd.Version <= nightly.Version || upd.Spec["schedule"] != "@hourly" || upd.Spec["name"] != "nightly" ||
		!upd.CreatedAt.Equal(nightly.CreatedAt) {
		t.Fatalf("update: %+v %v", upd, err)
	}
	// Every other kind is changed the same way, each change a new version.
	last := upd.Version
	for _, c := range []struct{ kind, name, doc, key string }{
		{"connection", "lab", `{kind: fake, options: {seed: 3, vms: 2}}`, "options"},
		{"repository", "main", fmt.Sprintf(`{location: %s, password-file: %s, streams: 2}`, filepath.Join(e.dir, "main"), pwFile), "streams"},
		{"notification-target", "chat", `{webhook: {url: "https://hooks.example.com/y"}}`, "webhook"},
		{"notification-matcher", "failures", `{targets: [chat], severities: [error]}`, "severities"},
	} {
		o, err := servicetest.UpdateObject(ctx, s, c.kind, c.name, spec(t, c.doc), 0)
		if err != nil || o.Version <= last || o.Spec[c.key] == nil || o.Name != c.name {
			t.Fatalf("update %s %s: %+v %v", c.kind, c.name, o, err)
		}
		last = o.Version
		if c.kind == "notification-matcher" {
			matcher = o
		}
	}
	ran := 0
	for _, c := range []struct{ kind, name, users string }{
		{"connection", "lab", "connection lab is used by policy nightly"},
		{"repository", "main", "repository main is used by policy nightly"},
		{"notification-target", "chat", "target chat is used by matcher(s) failures"},
	} {
		_, err := servicetest.DeleteObject(ctx, s, c.kind, c.name, 0)
		wantClass(t, "deleting "+c.name+", which is in use", err, api.Conflict, c.users)
		ran++
	}
	if ran != 3 {
		t.Fatal("not every refusal was checked")
	}
	del, err := servicetest.DeleteObject(ctx, s, "notification-matcher", "failures", matcher.Version)
	if err != nil || del.Name != "failures" || del.Spec["targets"] == nil {
		t.Fatalf("delete matcher: %+v %v", del, err)
	}
	for _, x := range []struct{ kind, name string }{{"notification-target", "chat"}, {"policy", "nightly"}, {"connection", "lab"}, {"repository", "main"}} {
		if _, err := servicetest.DeleteObject(ctx, s, x.kind, x.name, 0); err != nil {
			t.Fatalf("delete %s %s: %v", x.kind, x.name, err)
		}
	}
	_, err = servicetest.GetObject(ctx, s, "policy", "nightly")
	wantClass(t, "get of a deleted policy", err, api.NotFound, `no policy is named "nightly"`)
	_, err = servicetest.DeleteObject(ctx, s, "policy", "nightly", 0)
	wantClass(t, "delete of a deleted policy", err, api.NotFound, `no policy named "nightly" was created through the API`)
	if all, err := servicetest.ListObjects(ctx, s, ""); err != nil || len(all) != 0 {
		t.Fatalf("objects left: %+v %v", all, err)
	}
	_, err = servicetest.CreateObject(context.Background(), s, "policy", spec(t, `{name: x, connection: lab}`))
	wantClass(t, "a change without a user", err, api.Unauthenticated, "no user to record the change under")
}

// lineRef is the position in the file's messages.
var lineRef = regexp.MustCompile(`line \d+: `)

// TestConfigObjectsFailWithTheFilesMessages: an object refused through
// the API is refused for the same problems, in the same words, as the
// same entry in the configuration file.
func TestConfigObjectsFailWithTheFilesMessages(t *testing.T) {
	e := newConfEnv(t, "connections: [{name: lab, kind: fake}]\n")
	s := e.service()
	for _, c := range []struct{ section, kind, entry string }{
		{"policies", "policy", `{name: a, connection: lab, scheduel: "@daily"}`},
		{"policies", "policy", `{name: a, connection: nope, mode: weekly, full-on: [caturday]}`},
		{"policies", "policy", `{name: a, connection: lab, schedule: "61 * * * *", select: {names: ["web-["]}}`},
		{"policies", "policy", `{name: a, connection: lab, snapshot: with-memory}`},
		{"policies", "policy", `{name: a, connection: lab, immutable-for: a month}`},
		{"policies", "policy", `{name: a, connection: lab, full-every: often}`},
		{"repositories", "repository", `{name: r, streams: -1}`},
		{"connections", "connection", `{name: c, kind: fake, options: {vms: 3, flavour: x}}`},
		{"connections", "connection", `{name: c, kind: hyper-v}`},
	} {
		// The same entry in a file, through the checks `policy check` runs.
		fileErr := fileProblems(t, "connections: [{name: lab, kind: fake}]\n"+c.section+":\n  - "+c.entry+"\n")
		if fileErr == nil {
			t.Fatalf("the file accepts %s", c.entry)
		}
		_, err := servicetest.CreateObject(e.ctx, s, c.kind, spec(t, c.entry))
		if service.Classify(err) != api.Invalid {
			t.Fatalf("%s: %v (class %s), want invalid", c.entry, err, service.Classify(err))
		}
		for _, problem := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(lineRef.ReplaceAllString(fileErr.Error(), ""), problem) {
				t.Errorf("%s: the API says %q, the file says:\n%v", c.entry, problem, fileErr)
			}
		}
	}
	if objs, _ := servicetest.ListObjects(e.ctx, s, ""); len(objs) != 1 {
		t.Fatalf("refused objects were stored: %+v", objs)
	}
}

// fileProblems is what coffer says of a configuration file: its
// decoders' error, else `policy check --offline`'s.
func fileProblems(t *testing.T, doc string) error {
	f, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.Decode(f)
	if err != nil {
		return err
	}
	dir := t.TempDir()
	s := operations.New(service.Config{Catalog: filepath.Join(dir, "catalog.db"), Engine: eng, EngineSource: confFile})
	_, err = planops.Ops{Service: s}.PolicyCheck(context.Background(), &api.CheckPoliciesInput{Offline: true})
	return err
}

// TestConfigFileWins: the file's objects cannot be created, changed or
// deleted through the API (the message says to edit the file); the
// catalog's fill in other names, and the effective configuration says
// where each object comes from, with the catalog's versions.
func TestConfigFileWins(t *testing.T) {
	e := newConfEnv(t, `
connections: [{name: lab, kind: fake, options: {vms: 2}}]
policies:
  - {name: nightly, connection: lab, schedule: "0 22 * * *"}
`)
	s := e.service()
	hourly, err := servicetest.CreateObject(e.ctx, s, "policy", spec(t, `{name: hourly, connection: lab, schedule: "@hourly"}`))
	if err != nil {
		t.Fatal(err)
	}
	const edit = "is defined in the configuration file /etc/coffer/coffer.yaml, which wins over the API for the names it defines: change it there"
	_, err = servicetest.CreateObject(e.ctx, s, "policy", spec(t, `{name: nightly, connection: lab}`))
	wantClass(t, "create over the file's policy", err, api.Conflict, "policy nightly "+edit)
	_, err = servicetest.UpdateObject(e.ctx, s, "policy", "nightly", spec(t, `{connection: lab}`), 0)
	wantClass(t, "update of the file's policy", err, api.Conflict, "policy nightly "+edit)
	_, err = servicetest.DeleteObject(e.ctx, s, "connection", "lab", 0)
	wantClass(t, "delete of the file's connection", err, api.Conflict, "connection lab "+edit)

	eff, err := configops.Ops{Service: s}.EffectiveConfig(e.ctx, &api.GetEffectiveConfigInput{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range eff.Objects {
		got = append(got, fmt.Sprintf("%s/%s:%s@%d", o.Kind, o.Name, o.Source, o.Version))
	}
	want := fmt.Sprintf("connection/lab:file@0 policy/hourly:catalog@%d policy/nightly:file@0", hourly.Version)
	if strings.Join(got, " ") != want || eff.File != confFile || eff.Generation != hourly.Version || len(eff.Problems) != 0 {
		t.Fatalf("effective configuration: %s (file %q, generation %d, problems %v)\nwant %s", strings.Join(got, " "), eff.File,
			eff.Generation, eff.Problems, want)
	}
	// The file gains the name later: its object wins, the catalog's is
	// listed as overridden and can be deleted.
	e.file += "  - {name: hourly, connection: lab, schedule: \"@daily\"}\n"
	s = e.service()
	eff, err = configops.Ops{Service: s}.EffectiveConfig(e.ctx, &api.GetEffectiveConfigInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(eff.Overridden) != 1 || eff.Overridden[0].Name != "hourly" || !eff.Overridden[0].Overridden || eff.Overridden[0].Version != hourly.Version {
		t.Fatalf("overridden: %+v", eff.Overridden)
	}
	for _, o := range eff.Objects {
		if o.Name == "hourly" && (o.Source != "file" || o.Spec["schedule"] != "@daily") {
			t.Fatalf("hourly in effect: %+v", o)
		}
	}
	check, err := planops.Ops{Service: s}.PolicyCheck(e.ctx, &api.CheckPoliciesInput{Offline: true})
	if err != nil || len(check.Policies) != 2 {
		t.Fatalf("policy check sees %+v, %v", check, err)
	}
	if _, err := servicetest.DeleteObject(e.ctx, s, "policy", "hourly", 0); err != nil {
		t.Fatalf("deleting the overridden copy: %v", err)
	}
}

// TestConfigStaleVersionsConflict: a change made against a version that
// is no longer the object's (another user changed it meanwhile) is
// refused as a conflict that says what happened; the version read last
// goes through.
func TestConfigStaleVersionsConflict(t *testing.T) {
	e := newConfEnv(t, "connections: [{name: lab, kind: fake}]\n")
	alice, bob := e.service(), e.service() // two servers
	bobCtx := auth.WithSubject(context.Background(), &auth.Subject{User: "bob"})
	p, err := servicetest.CreateObject(e.ctx, alice, "policy", spec(t, `{name: p, connection: lab}`))
	if err != nil {
		t.Fatal(err)
	}
	read := p.Version
	if _, err := servicetest.UpdateObject(bobCtx, bob, "policy", "p", spec(t, `{connection: lab, schedule: "@daily"}`), read); err != nil {
		t.Fatal(err)
	}
	_, err = servicetest.UpdateObject(e.ctx, alice, "policy", "p", spec(t, `{connection: lab, schedule: "@hourly"}`), read)
	wantClass(t, "a stale update", err, api.Conflict, fmt.Sprintf("policy p changed since version %d", read))
	if !errors.Is(err, catalog.ErrStale) || !strings.Contains(err.Error(), "changed by bob") {
		t.Fatalf("a stale update: %v", err)
	}
	_, err = servicetest.DeleteObject(e.ctx, alice, "policy", "p", read)
	wantClass(t, "a stale delete", err, api.Conflict, "read it again")
	now, err := servicetest.GetObject(e.ctx, alice, "policy", "p")
	if err != nil || now.Spec["schedule"] != "@daily" {
		t.Fatalf("after the refusals: %+v %v", now, err)
	}
	if _, err := servicetest.DeleteObject(e.ctx, alice, "policy", "p", now.Version); err != nil {
		t.Fatal(err)
	}
}

package configobj

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
)

// fileState merges a configuration file with stored objects.
func fileState(t *testing.T, doc string, stored ...catalog.ConfigObject) *State {
	t.Helper()
	f, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := notify.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := maintenance.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Merge(File{Path: "/etc/coffer/coffer.yaml", Engine: eng, Notify: nc, Maintenance: m}, stored, int64(len(stored)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validate is the file's validators alone.
func validate(e *policy.Config, n *notify.Config, m *maintenance.Config) error {
	_, merr := m.Jobs(e)
	return errors.Join(e.Validate(), n.Validate(), merr)
}

func stored(kind, name, spec string, version int64) catalog.ConfigObject {
	return catalog.ConfigObject{Kind: kind, Name: name, Spec: []byte(spec), Version: version, CreatedBy: "alice", UpdatedBy: "alice"}
}

const file = `
connections:
  - {name: lab, kind: fake, options: {vms: 3}}
repositories:
  - {name: main, location: /srv/main, password-file: /etc/coffer/main.pw}
policies:
  - {name: nightly, connection: lab, repository: main, schedule: "0 22 * * *", timeouts: {vm: 4h}, retention: {keep-daily: 7}}
notifications:
  targets:
    - {name: chat, webhook: {url: "https://hooks.example.com/x", secret-file: /etc/coffer/hook.secret}}
`

// TestFileWins: an object the file defines is the file's; the catalog's
// objects fill in other names, and one whose name the file (later) defines
// too is listed as overridden, not used.
func TestFileWins(t *testing.T) {
	s := fileState(t, file,
		stored("connection", "spare", `{"name":"spare","kind":"fake"}`, 1),
		stored("policy", "nightly", `{"name":"nightly","connection":"spare"}`, 2),
		stored("policy", "hourly", `{"name":"hourly","connection":"spare","schedule":"@hourly"}`, 3),
		stored("notification-matcher", "all", `{"name":"all","targets":["chat"]}`, 4))
	var got []string
	for _, o := range s.Objects {
		got = append(got, string(o.Kind)+"/"+o.Name+":"+string(o.Source))
	}
	want := "connection/lab:file connection/spare:catalog repository/main:file policy/hourly:catalog policy/nightly:file " +
		"notification-target/chat:file notification-matcher/all:catalog"
	if strings.Join(got, " ") != want {
		t.Fatalf("objects in effect:\n got  %s\n want %s", strings.Join(got, " "), want)
	}
	if len(s.Overridden) != 1 || s.Overridden[0].Name != "nightly" || !s.Overridden[0].Overridden || s.Overridden[0].Version != 2 {
		t.Fatalf("overridden: %+v", s.Overridden)
	}
	if p, _ := s.Engine.Policy("nightly"); p.Connection != "lab" {
		t.Fatalf("the engine runs nightly on %q, want the file's lab", p.Connection)
	}
	if len(s.Engine.Policies) != 2 || len(s.Engine.Connections) != 2 || len(s.Notify.Matchers) != 1 {
		t.Fatalf("merged: %+v %+v", s.Engine, s.Notify)
	}
	// The file's objects read like their entries: defaults left out.
	nightly, _ := s.Lookup(Policy, "nightly")
	b, _ := json.Marshal(nightly.Spec)
	if string(b) != `{"connection":"lab","name":"nightly","repository":"main","retention":{"keep-daily":7},"schedule":"0 22 * * *","timeouts":{"vm":"4h0m0s"}}` {
		t.Fatalf("spec of the file's policy: %s", b)
	}
	lab, _ := s.Lookup(Connection, "lab")
	if b, _ := json.Marshal(lab.Spec); string(b) != `{"kind":"fake","name":"lab","options":{"vms":3}}` {
		t.Fatalf("spec of the file's connection: %s", b)
	}
	if len(s.Of(Policy)) != 3 {
		t.Fatalf("policies listed: %+v", s.Of(Policy))
	}

	// Changes of the file's objects are refused, saying where to make them.
	for what, err := range map[string]error{
		"create": second(s.PlanCreate(Policy, Spec{"name": "nightly", "connection": "lab"}, validate)),
		"update": second(s.PlanUpdate(Repository, "main", Spec{"location": "/srv/other"}, validate)),
		"delete": second(s.PlanDelete(Connection, "lab", validate)),
	} {
		if !errors.Is(err, ErrFileDefined) || !strings.Contains(err.Error(), "is defined in the configuration file /etc/coffer/coffer.yaml") {
			t.Errorf("%s of an object of the file: %v", what, err)
		}
	}
	// The overridden copy in the catalog can be deleted; nothing in
	// effect changes.
	p, err := s.PlanDelete(Policy, "nightly", validate)
	if err != nil || p.Before.Version != 2 || len(p.Engine.Policies) != 2 {
		t.Fatalf("deleting the overridden copy: %+v %v", p, err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestPlans: creations, updates and deletions are checked with the
// file's decoders and validators, and refused with the file's messages;
// deleting what others use names them and where they are defined.
func TestPlans(t *testing.T) {
	s := fileState(t, file, stored("connection", "spare", `{"name":"spare","kind":"fake"}`, 1),
		stored("policy", "hourly", `{"name":"hourly","connection":"spare"}`, 2),
		stored("repository", "extra", `{"name":"extra","location":"/srv/extra"}`, 3))

	p, err := s.PlanCreate(Policy, Spec{"name": "weekly", "connection": "spare", "repository": "extra", "full-every": 4}, validate)
	if err != nil || p.Verb != Create || string(p.Spec) != `{"connection":"spare","full-every":4,"name":"weekly","repository":"extra"}` ||
		len(p.Engine.Policies) != 3 || len(s.Engine.Policies) != 2 {
		t.Fatalf("create: %+v %v", p, err)
	}
	for _, c := range []struct {
		what string
		spec Spec
		want string
	}{
		{"unknown key", Spec{"name": "w", "connection": "spare", "scheduel": "@daily"},
			`unknown key "scheduel" in policies[0] (did you mean "schedule"?)`},
		{"unknown connection", Spec{"name": "w", "connection": "nope"}, `policy w: unknown connection "nope" (known: lab, spare)`},
		{"bad cron", Spec{"name": "w", "connection": "spare", "schedule": "61 * * * *"}, `policy w: schedule "61 * * * *"`},
		{"bad type", Spec{"name": "w", "connection": "spare", "full-every": "often"}, "cannot unmarshal !!str `often` into int"},
		{"no name", Spec{"connection": "spare"}, "the policy has no name"},
		{"bad name", Spec{"name": "a/b", "connection": "spare"}, `policy name "a/b": a name is 1 to 64 letters`},
		{"exists", Spec{"name": "hourly", "connection": "spare"}, "policy hourly exists already (version 2)"},
	} {
		_, err := s.PlanCreate(Policy, c.spec, validate)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: %v\nwant %s", c.what, err, c.want)
		}
	}
	for _, c := range []struct {
		kind Kind
		spec Spec
		want string
	}{
		{Repository, Spec{"name": "r", "location": "/srv/r", "password": "hunter2"},
			"repositories[0].password: secrets are not written in the configuration: put it alone in a file only coffer can read"},
		{Connection, Spec{"name": "vc", "kind": "vsphere", "options": map[string]any{"password": "hunter2"}},
			"connections[0].options.password: secrets are not written in the configuration"},
		{NotificationTarget, Spec{"name": "m", "smtp": map[string]any{"host": "h", "password": "hunter2"}},
			"notifications.targets[0].smtp: password: secrets are not written in the configuration"},
	} {
		_, err := s.PlanCreate(c.kind, c.spec, validate)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("inline secret in a %s: %v\nwant %s", c.kind, err, c.want)
		}
	}

	p, err = s.PlanUpdate(Policy, "hourly", Spec{"connection": "spare", "schedule": "@hourly"}, validate)
	if err != nil || strings.Join(p.Changed, ",") != "schedule" || string(p.Spec) != `{"connection":"spare","name":"hourly","schedule":"@hourly"}` {
		t.Fatalf("update: %+v %v", p, err)
	}
	if _, err := s.PlanUpdate(Policy, "hourly", Spec{"name": "daily", "connection": "spare"}, validate); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "cannot be renamed") {
		t.Fatalf("rename: %v", err)
	}
	if _, err := s.PlanUpdate(Policy, "gone", Spec{"connection": "spare"}, validate); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("update of a missing object: %v", err)
	}

	_, err = s.PlanDelete(Connection, "spare", validate)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "connection spare is used by policy hourly: change the policy") {
		t.Fatalf("deleting a connection in use: %v", err)
	}
	// A file's policy that uses a catalog's repository is named with the
	// file that must change.
	s2 := fileState(t, `
connections: [{name: lab, kind: fake}]
policies: [{name: nightly, connection: lab, repository: extra}]
`, stored("repository", "extra", `{"name":"extra","location":"/srv/extra"}`, 1))
	_, err = s2.PlanDelete(Repository, "extra", validate)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "repository extra is used by policy nightly") ||
		!strings.Contains(err.Error(), "(policy nightly: defined in the configuration file /etc/coffer/coffer.yaml, to be changed there)") {
		t.Fatalf("deleting a repository a file's policy uses: %v", err)
	}
	p, err = s.PlanDelete(Policy, "hourly", validate)
	if err != nil || len(p.Engine.Policies) != 1 {
		t.Fatalf("delete: %+v %v", p, err)
	}
}

// TestOnlyNewProblemsRefuse: a configuration that already has a problem
// (here the file's policy names a connection nobody defined) does not
// block changes that add none; the change that fixes it goes through.
func TestOnlyNewProblemsRefuse(t *testing.T) {
	s := fileState(t, "policies: [{name: nightly, connection: lab}]\n")
	if err := validate(s.Engine, s.Notify, s.Maintenance); err == nil {
		t.Fatal("the file's configuration is valid: the test needs one with a problem")
	}
	if _, err := s.PlanCreate(Repository, Spec{"name": "extra", "location": "/srv/extra"}, validate); err != nil {
		t.Fatalf("an unrelated change: %v", err)
	}
	p, err := s.PlanCreate(Connection, Spec{"name": "lab", "kind": "fake"}, validate)
	if err != nil || validate(p.Engine, p.Notify, p.Maintenance) != nil {
		t.Fatalf("the change that mends it: %v", err)
	}
	if _, err := s.PlanCreate(Policy, Spec{"name": "other", "connection": "nope"}, validate); err == nil ||
		!strings.Contains(err.Error(), `policy other: unknown connection "nope"`) || strings.Contains(err.Error(), "policy nightly") {
		t.Fatalf("a change that adds a problem is refused for it alone: %v", err)
	}
}

// TestStoredObjectThatNoLongerReads: an object of the catalog that the
// file's decoder refuses (written by another version) is an error naming
// it and what to do.
func TestStoredObjectThatNoLongerReads(t *testing.T) {
	_, err := Merge(File{}, []catalog.ConfigObject{stored("policy", "old", `{"name":"old","frequency":"daily"}`, 7)}, 7)
	if err == nil || !strings.Contains(err.Error(), "policy old of the catalog (version 7) no longer reads") ||
		!strings.Contains(err.Error(), `unknown key "frequency"`) {
		t.Fatalf("%v", err)
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]Kind{"policy": Policy, "policies": Policy, "notification-targets": NotificationTarget} {
		if k, err := ParseKind(in); err != nil || k != want {
			t.Errorf("%s: %v %v", in, k, err)
		}
	}
	if _, err := ParseKind("vm"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "connection, repository, policy") {
		t.Errorf("unknown kind: %v", err)
	}
	if got := NotificationTarget.Path("ops mail"); got != "/system/notification-targets/ops%20mail" {
		t.Errorf("path: %s", got)
	}
}

// TestMediaLibraryObjects: a media library is an object like the others:
// the file's wins, the catalog's fill in, created and deleted through
// plans checked by the file's decoder and validators.
func TestMediaLibraryObjects(t *testing.T) {
	s := fileState(t, file+"media-libraries: [{name: vtl1, kind: vtl, directory: /srv/vtl}]\n",
		stored("media-library", "vtl2", `{"name":"vtl2","kind":"vtl","directory":"/srv/vtl2"}`, 1))
	if len(s.Engine.MediaLibraries) != 2 {
		t.Fatalf("merged libraries: %+v", s.Engine.MediaLibraries)
	}
	if o, ok := s.Lookup(MediaLibrary, "vtl1"); !ok || o.Source != FromFile || o.Spec["directory"] != "/srv/vtl" {
		t.Fatalf("the file's library: %+v", o)
	}
	if got := MediaLibrary.Path("vtl 2"); got != "/media/vtl%202" {
		t.Errorf("path: %s", got)
	}
	if k, err := ParseKind("media-libraries"); err != nil || k != MediaLibrary {
		t.Errorf("media-libraries: %v %v", k, err)
	}
	p, err := s.PlanCreate(MediaLibrary, Spec{"name": "vtl3", "kind": "vtl", "directory": "/srv/vtl3"}, validate)
	if err != nil || len(p.Engine.MediaLibraries) != 3 {
		t.Fatalf("create: %+v %v", p, err)
	}
	for spec, want := range map[string]Spec{
		"media library v: directory is missing":                   {"name": "v", "kind": "vtl"},
		`unknown key "dir" in media-libraries[0]`:                 {"name": "v", "kind": "vtl", "dir": "/x"},
		"media-library vtl1 is defined in the configuration file": {"name": "vtl1", "kind": "vtl", "directory": "/x"},
	} {
		if _, err := s.PlanCreate(MediaLibrary, want, validate); err == nil || !strings.Contains(err.Error(), spec) {
			t.Errorf("create %v: %v\nwant %s", want, err, spec)
		}
	}
	if p, err := s.PlanDelete(MediaLibrary, "vtl2", validate); err != nil || len(p.Engine.MediaLibraries) != 1 {
		t.Fatalf("delete: %+v %v", p, err)
	}
}

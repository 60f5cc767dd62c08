package configobj

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/policy"
)

// TestLimitsMergeKeyByKey: limits is one object, merged with the file's
// section key by key: the file's keys win, the object fills in the
// others, and the object says which of its keys the file sets.
func TestLimitsMergeKeyByKey(t *testing.T) {
	s := fileState(t, file+"limits: {tasks: 64, rate: 400MiB/s}\n",
		stored("limits", SingletonName, `{"tasks":8,"per-host":3,"task-rate":"50MiB/s"}`, 1))
	l := s.Engine.Limits
	if l.Tasks != 64 || l.Rate != 400<<20 || l.PerHost != 3 || l.TaskRate != 50<<20 {
		t.Fatalf("limits in effect: %+v", l)
	}
	o, ok := s.Lookup(Limits, SingletonName)
	if !ok || o.Source != FromCatalog || strings.Join(o.FileKeys, ",") != "tasks" || o.Version != 1 {
		t.Fatalf("the limits object: %+v", o)
	}
	var sources []string
	for _, o := range s.Of(Limits) {
		sources = append(sources, string(o.Source))
	}
	if strings.Join(sources, " ") != "file catalog" {
		t.Fatalf("limits objects listed: %v", sources)
	}

	// A change: the file's keys stay in effect; the object's others apply.
	p, err := s.PlanUpdate(Limits, SingletonName, Spec{"tasks": 2, "per-datastore": 2}, validate)
	if err != nil || p.Engine.Limits.Tasks != 64 || p.Engine.Limits.PerDatastore != 2 || p.Engine.Limits.PerHost != 0 ||
		string(p.Spec) != `{"per-datastore":2,"tasks":2}` {
		t.Fatalf("update: %+v %v", p, err)
	}
	// The file's validators refuse what they refuse in the file, with
	// its messages; a name other than the one object's is refused.
	for want, spec := range map[string]Spec{
		"limits.per-host must not be negative":       {"per-host": -1},
		`unknown key "task" in limits (did you mean`: {"task": 4},
		"cannot be renamed":                          {"name": "other", "tasks": 4},
	} {
		if _, err := s.PlanUpdate(Limits, SingletonName, spec, validate); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("update limits %v: %v\nwant %s", spec, err, want)
		}
	}
	for want, spec := range map[string]Spec{
		"there is one limits object, named default":         {"name": "other", "tasks": 4},
		"limits default exists already (version 1): change": {"tasks": 4},
	} {
		if _, err := s.PlanCreate(Limits, spec, validate); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("create limits %v: %v\nwant %s", spec, err, want)
		}
	}
	// Deleted, the file's limits alone are in effect.
	p, err = s.PlanDelete(Limits, SingletonName, validate)
	if err != nil || p.Engine.Limits != (policy.Limits{Tasks: 64, Rate: 400 << 20}) {
		t.Fatalf("delete: %+v %v", p, err)
	}
	// Without a file section, the object is the limits.
	s = fileState(t, file)
	p, err = s.PlanCreate(Limits, Spec{"tasks": 3}, validate)
	if err != nil || p.Name != SingletonName || p.Engine.Limits.Tasks != 3 {
		t.Fatalf("create: %+v %v", p, err)
	}
}

// TestNamedEngineSettings: latency-control entries, resource groups and
// storage snapshot providers are objects by name: the file's come first
// (and win for the names they define), the catalog's follow.
func TestNamedEngineSettings(t *testing.T) {
	s := fileState(t, file+`
latency-control: [{datastores: [/srv/vms], threshold: 20ms}, {name: ssd, datastores: [/srv/ssd]}]
resource-groups: [{name: ctl-a, datastores: [ds-*], limit: 2}]
storage-snapshots: [{name: xfs, kind: reflink, connections: [lab], datastores: [/srv/vms]}]
`, stored("latency-control", "all", `{"name":"all","datastores":["/srv/*"],"threshold":"50ms"}`, 1),
		stored("resource-group", "ctl-b", `{"name":"ctl-b","hosts":["esx-*"],"limit":1}`, 2),
		stored("storage-snapshot-provider", "array", `{"name":"array","kind":"exec","connections":["lab"],"datastores":["/mnt/lun"],"command":["/bin/snap"]}`, 3))
	lc := s.Engine.LatencyControl
	if len(lc) != 3 || lc[0].Name != "" || lc[2].Name != "all" {
		t.Fatalf("latency-control in effect: %+v", lc)
	}
	if c, _ := lc.For("/srv/vms"); time.Duration(c.Threshold) != 20*time.Millisecond {
		t.Fatalf("the file's entry applies to /srv/vms first: %+v", c)
	}
	if c, _ := lc.For("/srv/other"); time.Duration(c.Threshold) != 50*time.Millisecond {
		t.Fatalf("the catalog's entry applies where the file's name nothing: %+v", c)
	}
	if o, ok := s.Lookup(LatencyControl, "#1"); !ok || o.Source != FromFile {
		t.Fatalf("the file's unnamed entry is listed as #1: %+v", s.Of(LatencyControl))
	}
	if len(s.Engine.ResourceGroups) != 2 || len(s.Engine.StorageSnapshots) != 2 {
		t.Fatalf("merged: %+v %+v", s.Engine.ResourceGroups, s.Engine.StorageSnapshots)
	}
	for _, c := range []struct {
		kind Kind
		spec Spec
		want string
	}{
		{LatencyControl, Spec{"name": "ssd", "datastores": []any{"/x"}}, "latency-control ssd is defined in the configuration file"},
		{LatencyControl, Spec{"name": "x", "datastores": []any{"/x"}, "cpu-nice": 40}, "latency-control x: cpu-nice 40 is out of range"},
		{LatencyControl, Spec{"name": "x", "datastores": []any{"/x"}, "treshold": "1s"}, `unknown key "treshold" in latency-control[0]`},
		{ResourceGroup, Spec{"name": "ctl-a", "hosts": []any{"h"}, "limit": 1}, "resource-group ctl-a is defined in the configuration file"},
		{ResourceGroup, Spec{"name": "g", "hosts": []any{"h"}}, "resource group g: limit must be at least 1"},
		{StorageProvider, Spec{"name": "p", "kind": "reflink", "connections": []any{"nope"}, "datastores": []any{"/d"}},
			`storage-snapshots p: unknown connection "nope"`},
	} {
		if _, err := s.PlanCreate(c.kind, c.spec, validate); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %s %v: %v\nwant %s", c.kind, c.spec, err, c.want)
		}
	}
	p, err := s.PlanUpdate(ResourceGroup, "ctl-b", Spec{"hosts": []any{"esx-*"}, "limit": 4}, validate)
	if err != nil || p.Engine.ResourceGroups[1].Limit != 4 || len(p.Engine.ResourceGroups) != 2 {
		t.Fatalf("update: %+v %v", p, err)
	}
	p, err = s.PlanDelete(StorageProvider, "array", validate)
	if err != nil || len(p.Engine.StorageSnapshots) != 1 || p.Engine.StorageSnapshots[0].Name != "xfs" {
		t.Fatalf("delete: %+v %v", p, err)
	}
	p, err = s.PlanDelete(LatencyControl, "all", validate)
	if err != nil || len(p.Engine.LatencyControl) != 2 {
		t.Fatalf("delete: %+v %v", p, err)
	}
	if _, err := s.PlanDelete(LatencyControl, "ssd", validate); !errors.Is(err, ErrFileDefined) {
		t.Fatalf("delete of the file's entry: %v", err)
	}
}

// TestLatencyControlThatMeasuresNothing: an entry whose datastores are
// no directories, in a configuration whose connections report no disk
// latency, is refused with why; a directory, or a connection that times
// its VMs' disks, makes it measurable.
func TestLatencyControlThatMeasuresNothing(t *testing.T) {
	timed := func(kind string) bool { return kind == "qemu" }
	entry := policy.LatencyControls{{Name: "ssd", Datastores: []string{"ssd-*"}}}
	errs := entry.Unmeasurable([]policy.Connection{{Name: "vc", Kind: "vsphere"}}, timed)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "latency-control ssd: it can measure nothing: its datastores [ssd-*] are not directories") ||
		!strings.Contains(errs[0].Error(), "the configuration's connections do not: vc (vsphere)") {
		t.Fatalf("%v", errs)
	}
	if errs := entry.Unmeasurable(nil, timed); len(errs) != 1 || !strings.Contains(errs[0].Error(), "the configuration has no connection") {
		t.Fatalf("no connection: %v", errs)
	}
	if errs := entry.Unmeasurable([]policy.Connection{{Name: "lab", Kind: "qemu"}}, timed); len(errs) != 0 {
		t.Fatalf("a connection that times its disks: %v", errs)
	}
	dirs := policy.LatencyControls{{Datastores: []string{"ssd-*", "/srv/vms"}}}
	if errs := dirs.Unmeasurable(nil, timed); len(errs) != 0 {
		t.Fatalf("a directory has a block device: %v", errs)
	}
}

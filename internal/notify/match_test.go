package notify

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)

// sampleEvents has one event of every type coffer emits.
func sampleEvents() map[Type]Event {
	vm := Subject{Policy: "prod-nightly", Connection: "lab", VM: "web-01", Repository: "main"}
	return map[Type]Event{
		TypeTaskFailed: TaskFinished(vm, TaskDetails{Kind: KindVM, ID: "42", Status: "failed",
			Error: "snapshot: timed out", StartedAt: now.Add(-time.Hour), FinishedAt: now}),
		TypeTaskSucceeded: TaskFinished(vm, TaskDetails{Kind: KindVM, ID: "43", Status: "success", FinishedAt: now}),
		TypeRPOMissed:     RPOMissed(vm, 24*time.Hour, "a1b2", now.Add(-30*time.Hour), now),
		TypeVerifyDamage: VerifyDamage(Subject{Repository: "main"}, DamageDetails{DataLost: true,
			Points: []string{"a1b2", "c3d4"}, Findings: 3, Repair: "coffer repair packs"}, now),
		TypeRepositoryFull: RepositoryNearlyFull("main", 95, 100, 90, time.Time{}, now),
		TypeLockLapsing:    LockLapsing(vm, "a1b2", now.Add(72*time.Hour), 7, now),
	}
}

func TestEventConstructors(t *testing.T) {
	evs := sampleEvents()
	for _, typ := range Types {
		if typ == TypeTest {
			continue
		}
		ev, ok := evs[typ]
		if !ok {
			t.Fatalf("no sample event of type %s", typ)
		}
		if ev.Type != typ || ev.Title == "" || ev.Body == "" || ev.Object == "" || !slices.Contains(Severities, ev.Severity) {
			t.Errorf("%s: %+v", typ, ev)
		}
		details := 0
		for _, d := range []bool{ev.Task != nil, ev.RPO != nil, ev.Damage != nil, ev.Usage != nil, ev.Lock != nil} {
			if d {
				details++
			}
		}
		if details != 1 {
			t.Errorf("%s carries %d detail blocks, want 1", typ, details)
		}
		// The event survives its JSON form (how it waits in the catalog).
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, ev) {
			t.Errorf("%s: JSON round trip changed the event:\n%+v\n%+v (%v)", typ, back, ev, err)
		}
	}
	f := evs[TypeTaskFailed]
	if f.Severity != Error || f.Object != "/connections/lab/vm/web-01" || f.Title != "Backup of web-01 failed" ||
		!reflect.DeepEqual(f.Labels, map[string]string{"policy": "prod-nightly", "connection": "lab", "vm": "web-01",
			"repository": "main", "task": "vm"}) || !strings.Contains(f.Body, "Error: snapshot: timed out") {
		t.Errorf("task failed: %+v", f)
	}
	job := TaskFinished(Subject{Policy: "p"}, TaskDetails{Kind: KindBackupJob, ID: "7", Status: "partial", VMsTotal: 3,
		FailedVMs: []string{"db"}})
	if job.Type != TypeTaskFailed || job.Severity != Warning || job.Object != "/policies/p" ||
		!strings.Contains(job.Body, "VMs: 3, 1 failed") {
		t.Errorf("partial job: %+v", job)
	}
	d := evs[TypeVerifyDamage]
	if d.Severity != Error || !d.Damage.DataLost || !reflect.DeepEqual(d.Damage.Points, []string{"a1b2", "c3d4"}) ||
		d.Object != "/repositories/main" {
		t.Errorf("damage: %+v", d)
	}
	if m := VerifyDamage(Subject{Repository: "main"}, DamageDetails{Findings: 1}, now); m.Severity != Warning {
		t.Errorf("metadata-only damage has severity %s", m.Severity)
	}
	if u := evs[TypeRepositoryFull]; u.Usage.UsedPercent != 95 || u.Severity != Warning {
		t.Errorf("usage: %+v", u.Usage)
	}
	if r := evs[TypeRPOMissed]; r.RPO.RPOSeconds != 86400 || !strings.Contains(r.Body, "a1b2") {
		t.Errorf("rpo: %+v", r)
	}
}

func routeConfig(matchers ...Matcher) *Config {
	return &Config{
		Targets: []Target{
			{Name: "mail", SMTP: &SMTPTarget{Host: "h", From: "a@b.c", To: []string{"d@e.f"}}},
			{Name: "hook", Webhook: &WebhookTarget{URL: "https://x"}},
			{Name: "off", Disable: true, Webhook: &WebhookTarget{URL: "https://y"}},
		},
		Matchers: matchers,
	}
}

// TestDefaultRouting: without matchers every target gets failures, damage,
// RPO misses, full repositories and lapsing locks, not successes; a
// disabled target gets nothing; test events are never routed.
func TestDefaultRouting(t *testing.T) {
	c := routeConfig()
	for typ, ev := range sampleEvents() {
		got := c.Route(ev)
		want := []string{"hook", "mail"}
		if typ == TypeTaskSucceeded {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s goes to %v, want %v", typ, got, want)
		}
	}
	if got := c.Route(testEvent("mail", now)); got != nil {
		t.Errorf("a test event was routed to %v", got)
	}
}

func TestMatchers(t *testing.T) {
	evs := sampleEvents()
	other := TaskFinished(Subject{Policy: "dev", Connection: "lab", VM: "dev-01"}, TaskDetails{Kind: KindVM, Status: "failed"})
	cases := []struct {
		name    string
		matcher Matcher
		hits    []Event // events the matcher sends to hook
		misses  []Event
	}{
		{"by label", Matcher{Labels: map[string]string{"policy": "prod-*"}},
			[]Event{evs[TypeTaskFailed], evs[TypeTaskSucceeded], evs[TypeRPOMissed]}, []Event{other, evs[TypeVerifyDamage]}},
		{"by type", Matcher{Types: []Type{TypeTaskSucceeded}}, []Event{evs[TypeTaskSucceeded]}, []Event{evs[TypeTaskFailed]}},
		{"by severity", Matcher{Severities: []Severity{Warning}},
			[]Event{evs[TypeRepositoryFull], evs[TypeLockLapsing]}, []Event{evs[TypeTaskFailed]}},
		{"all of", Matcher{Types: []Type{TypeTaskFailed}, Labels: map[string]string{"vm": "web-*"}},
			[]Event{evs[TypeTaskFailed]}, []Event{other, evs[TypeRPOMissed]}},
		{"any of", Matcher{Mode: "any", Types: []Type{TypeRPOMissed}, Labels: map[string]string{"vm": "dev-*"}},
			[]Event{evs[TypeRPOMissed], other}, []Event{evs[TypeTaskFailed]}},
		{"inverted", Matcher{Invert: true, Types: []Type{TypeTaskSucceeded}},
			[]Event{evs[TypeTaskFailed], other}, []Event{evs[TypeTaskSucceeded]}},
		{"no condition", Matcher{}, []Event{evs[TypeTaskSucceeded], other}, nil},
		{"label absent", Matcher{Labels: map[string]string{"repository": "*"}}, []Event{evs[TypeVerifyDamage]}, []Event{other}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.matcher
			m.Name, m.Targets = "m", []string{"hook"}
			c := routeConfig(m)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, ev := range tc.hits {
				if got := c.Route(ev); !slices.Contains(got, "hook") {
					t.Errorf("%q (%v) did not reach hook: %v", ev.Title, ev.Labels, got)
				}
			}
			for _, ev := range tc.misses {
				if got := c.Route(ev); slices.Contains(got, "hook") {
					t.Errorf("%q (%v) reached hook: %v", ev.Title, ev.Labels, got)
				}
			}
			// mail, which no matcher names, keeps the default.
			if got := c.Route(evs[TypeTaskSucceeded]); slices.Contains(got, "mail") {
				t.Errorf("a success reached mail: %v", got)
			}
			if got := c.Route(evs[TypeTaskFailed]); !slices.Contains(got, "mail") {
				t.Errorf("a failure did not reach mail: %v", got)
			}
		})
	}
	// A disabled matcher is as if absent: its target falls back to the
	// default; matchers naming a disabled target send it nothing.
	c := routeConfig(Matcher{Name: "m", Disable: true, Targets: []string{"hook"}, Types: []Type{TypeTaskSucceeded}},
		Matcher{Name: "n", Targets: []string{"off"}})
	if got := c.Route(evs[TypeTaskSucceeded]); got != nil {
		t.Errorf("success went to %v", got)
	}
	if got := c.Route(evs[TypeTaskFailed]); !reflect.DeepEqual(got, []string{"hook", "mail"}) {
		t.Errorf("failure went to %v", got)
	}
}

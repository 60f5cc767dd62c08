package policy

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestLatencyControlSection(t *testing.T) {
	c, err := load(t, `
connections: [{name: lab, kind: fake}]
policies:
  - {name: archive, connection: lab, shares: low}
  - {name: db, connection: lab, shares: 3000}
  - {name: nightly, connection: lab}
latency-control:
  - {datastores: ["/srv/ssd-*"], threshold: 10ms, min-rate: 16MiB/s, interval: 250ms, cpu-nice: 19}
  - {datastores: ["/srv/fast"], cpu-nice: 0}
  - {datastores: ["/srv/*"]}
`)
	if err != nil {
		t.Fatal(err)
	}
	ssd, ok := c.LatencyControl.For("/srv/ssd-1")
	if !ok || time.Duration(ssd.Threshold) != 10*time.Millisecond || ssd.MinRate != 16<<20 || time.Duration(ssd.Interval) != 250*time.Millisecond || ssd.Nice() != 19 {
		t.Fatalf("/srv/ssd-1: %+v %v", ssd, ok)
	}
	hdd, ok := c.LatencyControl.For("/srv/vms")
	if !ok || time.Duration(hdd.Threshold) != DefaultLatencyThreshold || hdd.MinRate != DefaultLatencyMinRate || time.Duration(hdd.Interval) != DefaultLatencyInterval ||
		hdd.Nice() != DefaultCPUNice {
		t.Fatalf("/srv/vms takes the defaults: %+v %v", hdd, ok)
	}
	if fast, ok := c.LatencyControl.For("/srv/fast"); !ok || fast.Nice() != 0 {
		t.Fatalf("/srv/fast turns the CPU priority off: %+v %v", fast, ok)
	}
	if _, ok := c.LatencyControl.For("/var/lib/vms"); ok {
		t.Fatal("a datastore no entry names is watched")
	}
	for name, want := range map[string]int{"archive": 500, "db": 3000, "nightly": 1000} {
		if p, _ := c.Policy(name); p.Shares.Value() != want {
			t.Errorf("policy %s: %d shares, want %d", name, p.Shares.Value(), want)
		}
	}
	// Levels are written back by name.
	p, _ := c.Policy("archive")
	if out, err := yaml.Marshal(p.Shares); err != nil || strings.TrimSpace(string(out)) != "low" {
		t.Fatalf("shares low marshals as %q %v", out, err)
	}
}

func TestLatencyControlErrors(t *testing.T) {
	_, err := load(t, `
latency-control:
  - {threshold: 5ms}
  - {datastores: ["[x"], interval: 1ms, min-rate: 1MiB/s}
  - {datastores: [/srv/vms], cpu-nice: 20}
  - {datastores: [/srv/vms], cpu-nice: -1}
`)
	for _, want := range []string{
		"latency-control entry 1: datastores is missing",
		`latency-control entry 2: datastores: bad pattern "[x"`,
		"latency-control entry 2: interval 1ms is too short",
		"latency-control entry 3: cpu-nice 20 is out of range",
		"latency-control entry 4: cpu-nice -1 is out of range",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	for _, bad := range []string{"medium", "0", "-5", "100001"} {
		_, err := load(t, "connections: [{name: lab, kind: fake}]\npolicies: [{name: p, connection: lab, shares: \""+bad+"\"}]\n")
		if err == nil || !strings.Contains(err.Error(), "write low, normal, high or a number") {
			t.Errorf("shares %q: %v", bad, err)
		}
	}
}

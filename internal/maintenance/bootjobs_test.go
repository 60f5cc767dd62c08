package maintenance

import (
	"strings"
	"testing"
	"time"
)

func TestPoliciesVerifyBootBecomeJobs(t *testing.T) {
	c, eng, err := load(t, `
connections: [{name: kvm, kind: qemu}, {name: vc, kind: vsphere}]
repositories: [{name: main, location: /srv/main}]
policies:
  - name: web
    connection: kvm
    repository: main
    verify-boot: {schedule: "0 6 * * 0", timeout: 3m, marker: "login:", probes: ["tcp:22", "http:80/=200"]}
  - name: db
    connection: kvm
    verify-boot: {schedule: "@daily", points: first-of-day}
  - {name: plain, connection: kvm}
  - {name: vms, connection: vc, verify-boot: {schedule: "@weekly", probes: ["tcp:22"]}}
`)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Jobs(eng)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("jobs %+v, want the three verify-boot schedules", jobs)
	}
	web, db := jobs[0], jobs[1]
	if jobs[2].Policy != "vms" {
		t.Fatalf("a vSphere policy's verify-boot: %+v", jobs[2])
	}
	if web.Name != "main/verify-boot:web" || web.Kind != "verify-boot" || web.Repository != "main" || web.Policy != "web" ||
		web.Boot.Points != "latest" || time.Duration(web.Boot.Timeout) != 3*time.Minute || len(web.Boot.Probes) != 2 {
		t.Fatalf("web's job: %+v", web)
	}
	if db.Repository != "default" || db.Boot.Points != "first-of-day" {
		t.Fatalf("db's job: %+v", db)
	}
	sunday := time.Date(2026, 11, 29, 0, 0, 0, 0, time.Local)
	if next := web.Schedule.Next(sunday); !next.Equal(sunday.Add(6 * time.Hour)) {
		t.Fatalf("web's next run after %s: %s", sunday, next)
	}
}

func TestVerifyBootSettingsAreChecked(t *testing.T) {
	c, eng, err := load(t, `
connections: [{name: kvm, kind: qemu}, {name: vc, kind: vsphere}]
policies:
  - {name: a, connection: kvm, verify-boot: {points: newest}}
  - {name: b, connection: kvm, verify-boot: {schedule: "every day", marker: "(", probes: ["udp:53"], timeout: 1s}}
  - {name: c, connection: vc, verify-boot: {schedule: "@weekly", probes: ["exec:/bin/true"]}}
`)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Jobs(eng)
	if len(jobs) != 0 || err == nil {
		t.Fatalf("jobs %+v, err %v: want every verify-boot refused", jobs, err)
	}
	for _, want := range []string{
		"policy a: verify-boot: schedule is missing",
		`policy a: verify-boot: points "newest"`,
		`policy b: verify-boot: schedule "every day"`,
		`policy b: verify-boot: marker "(" is not a regular expression`,
		`probe "udp:53"`,
		"policy b: verify-boot: timeout 1s: at least 10s",
		"policy c: verify-boot: probe exec:/bin/true: connection vc is vSphere",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

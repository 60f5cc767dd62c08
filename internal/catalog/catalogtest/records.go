package catalogtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func testEvents(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	j1, j2 := &catalog.Job{Kind: "backup"}, &catalog.Job{Kind: "backup"}
	ok(t, c.CreateJob(ctx, j1))
	ok(t, c.CreateJob(ctx, j2))
	task := &catalog.Task{JobID: j1.ID, VMID: "vm"}
	ok(t, c.CreateTasks(ctx, []*catalog.Task{task}))
	ok(t, c.AddEvents(ctx, nil))
	in := []catalog.Event{
		{Time: base, JobID: j1.ID, Level: "info", Kind: "job-started", Message: "started"},
		{Time: base.Add(time.Second), JobID: j1.ID, TaskID: task.ID, Level: "info", Kind: "disk-done",
			Message: "disk sda done", Fields: map[string]any{"bytes": 1073741824, "seconds": 2.5, "mbps": 409.6,
				"disk": "sda", "ok": true, "nested": map[string]any{"x": []any{1, "y"}}}},
		{Time: base.Add(2 * time.Second), JobID: j2.ID, Level: "warn", Kind: "retry", Message: "snapshot busy"},
		{Time: base.Add(2 * time.Second), JobID: j1.ID, Level: "error", Kind: "failed", Message: "same instant"},
		{Time: base.Add(-time.Hour), Level: "info", Kind: "server-started", Message: "no job"},
	}
	ok(t, c.AddEvents(ctx, in))
	// Each event of a job is the next line of the job's log.
	same(t, "line numbers set by AddEvents", []int64{in[0].Seq, in[1].Seq, in[2].Seq, in[3].Seq, in[4].Seq},
		[]int64{1, 2, 1, 3, 0})
	all, err := c.ListEvents(ctx, catalog.EventFilter{})
	ok(t, err)
	if len(all) != len(in) {
		t.Fatalf("%d events listed, %d added", len(all), len(in))
	}
	kinds := func(es []catalog.Event) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Kind
		}
		return out
	}
	// Newest first; of the two events at the same instant the later one
	// (higher ID) comes first.
	same(t, "events newest first", kinds(all), []string{"failed", "retry", "disk-done", "job-started", "server-started"})
	disk := all[2]
	want := catalog.Event{ID: disk.ID, Time: at(time.Second), JobID: j1.ID, TaskID: task.ID, Seq: 2, Level: "info",
		Kind: "disk-done", Message: "disk sda done", Fields: map[string]any{"bytes": float64(1073741824),
			"seconds": 2.5, "mbps": 409.6, "disk": "sda", "ok": true, "nested": map[string]any{"x": []any{float64(1), "y"}}}}
	same(t, "event with fields", disk, want)
	if all[4].JobID != 0 || all[4].TaskID != 0 || all[4].Seq != 0 || all[4].Fields != nil {
		t.Fatalf("job-less event read back as %+v", all[4])
	}
	list := func(f catalog.EventFilter) []string {
		t.Helper()
		es, err := c.ListEvents(ctx, f)
		ok(t, err)
		return kinds(es)
	}
	same(t, "events of job 1", list(catalog.EventFilter{JobID: j1.ID}), []string{"failed", "disk-done", "job-started"})
	same(t, "events of the task", list(catalog.EventFilter{TaskID: task.ID}), []string{"disk-done"})
	same(t, "since", list(catalog.EventFilter{Since: base.Add(time.Second)}), []string{"failed", "retry", "disk-done"})
	same(t, "limit", list(catalog.EventFilter{JobID: j1.ID, Limit: 2}), []string{"failed", "disk-done"})
	same(t, "kinds of job 1", list(catalog.EventFilter{JobID: j1.ID, Kinds: []string{"job-started", "failed", "retry"}}),
		[]string{"failed", "job-started"})

	// A zero time is stamped with now.
	before := time.Now().Add(-time.Second)
	ok(t, c.AddEvents(ctx, []catalog.Event{{JobID: j2.ID, Kind: "stamped"}}))
	es, err := c.ListEvents(ctx, catalog.EventFilter{JobID: j2.ID, Limit: 1})
	ok(t, err)
	if len(es) != 1 || es[0].Kind != "stamped" || es[0].Time.Before(before) || es[0].Time.After(time.Now().Add(time.Second)) {
		t.Fatalf("stamped event: %+v", es)
	}
}

func point(repo, id string, d time.Duration, vm string) catalog.BackupPoint {
	return catalog.BackupPoint{Repository: repo, ID: id, Time: at(d), Connection: "qemu", VMID: vm, VMName: "name-" + vm,
		Mode: "full", Disks: 1, BytesLogical: 1 << 30, BytesStored: 1 << 20}
}

func listPoints(t *testing.T, c catalog.Catalog, f catalog.BackupPointFilter) []catalog.BackupPoint {
	t.Helper()
	ps, err := c.ListBackupPoints(context.Background(), f)
	ok(t, err)
	return ps
}

func testBackupPoints(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	ok(t, c.PutBackupPoints(ctx, nil))
	full := catalog.BackupPoint{Repository: "r1", ID: "p1", Time: at(0), Connection: "vc", VMID: "vm-1", VMName: "web",
		Mode: "incremental", Parent: "p0", Disks: 3, BytesLogical: 3 << 40, BytesStored: 12345,
		Tags: map[string]string{"env": "prod", "owner": "ops"}, Protected: true, JobID: 77,
		SnapshotMode: "quiesced", SnapshotModeAchieved: "crash-consistent", Hooks: "pre-failed"}
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{full, point("r1", "p2", time.Hour, "vm-2"),
		point("r2", "p1", 2*time.Hour, "vm-1"), point("r1", "p3", 3*time.Hour, "vm-1")}))
	all := listPoints(t, c, catalog.BackupPointFilter{})
	same(t, "points newest first", pointIDs(all), []string{"p3", "p1", "p2", "p1"})
	same(t, "full point", all[3], full)
	if all[0].Tags != nil || all[0].Protected || all[0].SnapshotMode != "" || all[0].SnapshotModeAchieved != "" || all[0].Hooks != "" {
		t.Fatalf("bare point read back as %+v", all[0])
	}

	same(t, "repository r1", pointIDs(listPoints(t, c, catalog.BackupPointFilter{Repository: "r1"})), []string{"p3", "p2", "p1"})
	same(t, "VM ID", pointIDs(listPoints(t, c, catalog.BackupPointFilter{Repository: "r1", VMID: "vm-1"})), []string{"p3", "p1"})
	same(t, "VM name", pointIDs(listPoints(t, c, catalog.BackupPointFilter{VMName: "name-vm-2"})), []string{"p2"})
	same(t, "since", pointIDs(listPoints(t, c, catalog.BackupPointFilter{Since: at(time.Hour)})), []string{"p3", "p1", "p2"})
	same(t, "limit", pointIDs(listPoints(t, c, catalog.BackupPointFilter{VMID: "vm-1", Limit: 2})), []string{"p3", "p1"})
	// Pages: after a point, in the same order; the two p1 (same ID in two
	// repositories) are told apart by their repository.
	tie := point("r3", "p1", 0, "vm-3")
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{tie}))
	var paged []string
	var cur catalog.PointCursor
	for {
		page := listPoints(t, c, catalog.BackupPointFilter{After: cur, Limit: 1})
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].ID+"@"+page[0].Repository)
		cur = page[0].Cursor()
	}
	same(t, "pages of one", paged, []string{"p3@r1", "p1@r2", "p2@r1", "p1@r1", "p1@r3"})
	ok(t, c.DeleteBackupPoints(ctx, "r3", []string{"p1"}))

	// Upsert: the same key replaces every field; the other repository's
	// point with the same ID is untouched.
	changed := full
	changed.Protected, changed.Tags, changed.BytesStored, changed.Time = false, map[string]string{"env": "test"}, 1, at(4*time.Hour)
	changed.SnapshotModeAchieved = "quiesced" // a rebuild from a rewritten manifest
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{changed}))
	r1 := listPoints(t, c, catalog.BackupPointFilter{Repository: "r1"})
	same(t, "after upsert", pointIDs(r1), []string{"p1", "p3", "p2"})
	same(t, "upserted point", r1[0], changed)
	same(t, "other repository", listPoints(t, c, catalog.BackupPointFilter{Repository: "r2"})[0], point("r2", "p1", 2*time.Hour, "vm-1"))

	ok(t, c.DeleteBackupPoints(ctx, "r1", []string{"p2", "missing"}))
	ok(t, c.DeleteBackupPoints(ctx, "r1", nil))
	same(t, "after delete", pointIDs(listPoints(t, c, catalog.BackupPointFilter{})), []string{"p1", "p3", "p1"})
	if err := c.PutBackupPoints(ctx, []catalog.BackupPoint{{Repository: "r1"}}); err == nil {
		t.Fatal("a point without an ID was accepted")
	}
}

// testNewestBackupPoints: the newest point of each VM asked for, across
// repositories, by time then ID; a VM of the same ID on another
// connection is another VM; more VMs than one query looks up.
func testNewestBackupPoints(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	other := point("r1", "o9", 9*time.Hour, "vm-1")
	other.Connection = "vc2"
	var many []catalog.BackupPoint
	var refs []catalog.VMRef
	for i := range 450 {
		vm := fmt.Sprintf("bulk-%03d", i)
		many = append(many, point("r1", "b"+vm, time.Duration(i)*time.Minute, vm))
		refs = append(refs, catalog.VMRef{Connection: "qemu", ID: vm})
	}
	ok(t, c.PutBackupPoints(ctx, append(many, point("r1", "a1", time.Hour, "vm-1"), point("r2", "a2", 3*time.Hour, "vm-1"),
		point("r1", "a3", 2*time.Hour, "vm-1"), point("r1", "t1", time.Hour, "vm-2"), point("r2", "t2", time.Hour, "vm-2"), other)))

	got, err := c.NewestBackupPoints(ctx, []catalog.VMRef{{Connection: "qemu", ID: "vm-1"}, {Connection: "qemu", ID: "vm-2"},
		{Connection: "qemu", ID: "none"}})
	ok(t, err)
	slices.SortFunc(got, func(a, b catalog.BackupPoint) int { return cmp.Compare(a.VMID, b.VMID) })
	same(t, "newest of vm-1 and vm-2 (a tie broken by ID)", got, []catalog.BackupPoint{point("r2", "a2", 3*time.Hour, "vm-1"),
		point("r2", "t2", time.Hour, "vm-2")})

	got, err = c.NewestBackupPoints(ctx, []catalog.VMRef{{Connection: "vc2", ID: "vm-1"}})
	ok(t, err)
	same(t, "the same VM ID on another connection", got, []catalog.BackupPoint{other})
	// Both at once: vc2's vm-1 was backed up last, qemu's is still found.
	got, err = c.NewestBackupPoints(ctx, []catalog.VMRef{{Connection: "qemu", ID: "vm-1"}, {Connection: "vc2", ID: "vm-1"},
		{Connection: "qemu", ID: "vm-1"}})
	ok(t, err)
	same(t, "a VM ID two connections share", got, []catalog.BackupPoint{point("r2", "a2", 3*time.Hour, "vm-1"), other})

	got, err = c.NewestBackupPoints(ctx, refs)
	ok(t, err)
	slices.SortFunc(got, func(a, b catalog.BackupPoint) int { return cmp.Compare(a.VMID, b.VMID) })
	same(t, "many VMs", got, many)

	got, err = c.NewestBackupPoints(ctx, nil)
	ok(t, err)
	same(t, "no VMs", len(got), 0)
}

func testReplaceBackupPoints(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{point("r1", "old1", 0, "a"), point("r1", "keep", time.Minute, "a"),
		point("r2", "other", 0, "b")}))
	kept := point("", "keep", 2*time.Minute, "a") // Repository filled in from the argument
	kept.SnapshotMode, kept.SnapshotModeAchieved = "with-memory", "crash-consistent"
	ok(t, c.ReplaceBackupPoints(ctx, "r1", []catalog.BackupPoint{kept, point("r1", "new", time.Hour, "c")}))
	r1 := listPoints(t, c, catalog.BackupPointFilter{Repository: "r1"})
	same(t, "replaced set", pointIDs(r1), []string{"new", "keep"})
	kept.Repository = "r1"
	same(t, "replaced point", r1[1], kept)
	same(t, "other repository untouched", pointIDs(listPoints(t, c, catalog.BackupPointFilter{Repository: "r2"})), []string{"other"})

	// A failing replace changes nothing.
	bad := []catalog.BackupPoint{point("r1", "x", 0, "a"), {Repository: "r1"}}
	if err := c.ReplaceBackupPoints(ctx, "r1", bad); err == nil {
		t.Fatal("replace with an invalid point succeeded")
	}
	if err := c.ReplaceBackupPoints(ctx, "r1", []catalog.BackupPoint{point("r2", "y", 0, "a")}); err == nil {
		t.Fatal("replace with a point of another repository succeeded")
	}
	same(t, "after failed replaces", pointIDs(listPoints(t, c, catalog.BackupPointFilter{Repository: "r1"})), []string{"new", "keep"})

	ok(t, c.ReplaceBackupPoints(ctx, "r1", nil))
	same(t, "emptied", len(listPoints(t, c, catalog.BackupPointFilter{Repository: "r1"})), 0)
	same(t, "other repository still untouched", len(listPoints(t, c, catalog.BackupPointFilter{})), 1)
}

func testVMs(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	ok(t, c.PutVMs(ctx, nil))
	web := catalog.VMRecord{Connection: "vc1", ID: "vm-10", Name: "web", Host: "esx1", Datastores: []string{"ds1"},
		Tags: map[string]string{"tier": "1"}, Bytes: 40 << 30, LastSeen: at(0)}
	ok(t, c.PutVMs(ctx, []catalog.VMRecord{web,
		{Connection: "vc1", ID: "vm-2", Name: "db", LastSeen: at(time.Second)},
		{Connection: "kvm", ID: "uuid-1", Name: "zeta"},
		{Connection: "vc1", ID: "vm-3", Name: "db"},
	}))
	vms, err := c.ListVMs(ctx)
	ok(t, err)
	key := func(vs []catalog.VMRecord) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = v.Connection + "/" + v.ID
		}
		return out
	}
	same(t, "VM order", key(vms), []string{"kvm/uuid-1", "vc1/vm-2", "vc1/vm-3", "vc1/vm-10"})
	same(t, "VM round trip", vms[3], web)
	if vms[0].Tags != nil || vms[0].Datastores != nil || !vms[0].LastSeen.IsZero() {
		t.Fatalf("bare VM read back as %+v", vms[0])
	}
	moved := web
	moved.Host, moved.Datastores, moved.Tags, moved.LastSeen = "esx2", []string{"ds2", "ds3"}, nil, at(time.Hour)
	ok(t, c.PutVMs(ctx, []catalog.VMRecord{moved}))
	vms, err = c.ListVMs(ctx)
	ok(t, err)
	same(t, "VM count after upsert", len(vms), 4)
	same(t, "upserted VM", vms[3], moved)
	if err := c.PutVMs(ctx, []catalog.VMRecord{{Connection: "x"}}); err == nil {
		t.Fatal("a VM without an ID was accepted")
	}
}

func testTimes(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	// A non-UTC zone and nanoseconds: stored as the same instant in UTC,
	// microsecond precision.
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	local := time.Date(2031, 12, 31, 23, 59, 59, 999999999, zone)
	j := &catalog.Job{Kind: "backup", CreatedAt: local, StartedAt: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)}
	ok(t, c.CreateJob(ctx, j))
	got, err := c.GetJob(ctx, j.ID)
	ok(t, err)
	if want := local.UTC().Truncate(time.Microsecond); !got.CreatedAt.Equal(want) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("CreatedAt %v (%v), want %v in UTC", got.CreatedAt, got.CreatedAt.Location(), want)
	}
	if !got.StartedAt.Equal(time.Unix(0, 0)) || got.StartedAt.IsZero() {
		t.Fatalf("the Unix epoch read back as %v", got.StartedAt)
	}
	if !got.FinishedAt.IsZero() {
		t.Fatalf("a zero time read back as %v", got.FinishedAt)
	}
	// Since filters compare instants, whatever the zone.
	jobs, err := c.ListJobs(ctx, catalog.JobFilter{Since: local.Add(-time.Microsecond).In(time.UTC)})
	ok(t, err)
	same(t, "since across zones", ids(jobs, jobID), []int64{j.ID})
}

// testNewestPointTimes: the newest time of every VM with a point, across
// repositories, a VM ID on two connections being two VMs; nothing for a
// catalog without points.
func testNewestPointTimes(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	got, err := c.NewestPointTimes(ctx)
	ok(t, err)
	same(t, "no points", len(got), 0)
	other := point("r1", "o1", 30*time.Minute, "vm-1")
	other.Connection = "vc2"
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{point("r1", "a1", time.Hour, "vm-1"), point("r2", "a2", 3*time.Hour, "vm-1"),
		point("r1", "a3", 2*time.Hour, "vm-1"), point("r1", "b1", time.Minute, "vm-2"), other}))
	got, err = c.NewestPointTimes(ctx)
	ok(t, err)
	same(t, "newest per VM", got, map[catalog.VMRef]time.Time{{Connection: "qemu", ID: "vm-1"}: at(3 * time.Hour),
		{Connection: "qemu", ID: "vm-2"}: at(time.Minute), {Connection: "vc2", ID: "vm-1"}: at(30 * time.Minute)})
}

// testNewestPolicyPointTimes: the newest time of every VM's points by the
// policy that made them, across repositories, points made by hand under
// policy "", a VM name on two connections being two VMs.
func testNewestPolicyPointTimes(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	got, err := c.NewestPolicyPointTimes(ctx)
	ok(t, err)
	same(t, "no points", len(got), 0)
	by := func(p catalog.BackupPoint, policy string) catalog.BackupPoint {
		p.Tags = map[string]string{"policy": policy, "other": "x"}
		return p
	}
	elsewhere := by(point("r1", "o1", 30*time.Minute, "vm-1"), "nightly")
	elsewhere.Connection = "vc2"
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{by(point("r1", "a1", time.Hour, "vm-1"), "nightly"),
		by(point("r2", "a2", 3*time.Hour, "vm-1"), "nightly"), by(point("r1", "a3", 4*time.Hour, "vm-1"), "hourly"),
		point("r1", "a4", 5*time.Hour, "vm-1"), by(point("r1", "b1", time.Minute, "vm-2"), "nightly"), elsewhere}))
	got, err = c.NewestPolicyPointTimes(ctx)
	ok(t, err)
	slices.SortFunc(got, func(a, b catalog.PolicyPointTime) int {
		return strings.Compare(a.Connection+"/"+a.VMName+"/"+a.Policy, b.Connection+"/"+b.VMName+"/"+b.Policy)
	})
	same(t, "newest per VM and policy", got, []catalog.PolicyPointTime{
		{Connection: "qemu", VMName: "name-vm-1", Policy: "", Time: at(5 * time.Hour)},
		{Connection: "qemu", VMName: "name-vm-1", Policy: "hourly", Time: at(4 * time.Hour)},
		{Connection: "qemu", VMName: "name-vm-1", Policy: "nightly", Time: at(3 * time.Hour)},
		{Connection: "qemu", VMName: "name-vm-2", Policy: "nightly", Time: at(time.Minute)},
		{Connection: "vc2", VMName: "name-vm-1", Policy: "nightly", Time: at(30 * time.Minute)},
	})
}

// Package catalogfill fills a real catalog (SQLite or PostgreSQL) with the
// history of a fleet, for benchmarks of what reads it: the server's status
// and list endpoints (bench/server) and the web console (bench/console).
// The default shape is issue 15's: 10,000 VMs, 100,000 backup points and
// 1,000,000 tasks, that is 1,000,000 jobs (every long operation is a job,
// the control plane's task) of which 100 are nightly policy runs over
// every VM, whose per-VM task rows number 1,000,000 too, and about
// 3,000,000 log lines.
//
// It lives under bench/ rather than internal/catalog/catalogtest because
// it is a benchmark fixture, not part of the conformance suite that every
// driver's tests import: it writes jobs and logs with the drivers' own
// bulk path (COPY on PostgreSQL) and numbers log lines itself, which
// nothing in production may do.
//
// Every row is a function of its index (Shape.Job, Shape.Task,
// Shape.Point, ...): a test fills a small catalog and reads each row back
// through the catalog's API to show that the bulk writes store what the
// catalog would have, and a benchmark can name existing rows (a job's ID,
// a VM with points) without reading them first.
package catalogfill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Shape is what a filled catalog holds.
type Shape struct {
	VMs         int // VMs in the inventory, spread over Connections
	Connections int
	// PointsPerVM backup points per VM, taken by the newest policy runs
	// (at most PolicyRuns of them).
	PointsPerVM int
	// Jobs in all, IDs 1..Jobs in the order they were created; every
	// Jobs/PolicyRuns-th is a policy run over every VM (one task row per
	// VM), the others single-VM operations (backups, restores, verifies,
	// gc) with LogLines lines each.
	Jobs       int
	PolicyRuns int
	LogLines   int
	// Audit records of the server's audit log.
	Audit int
	// Repository is the repository ID the points and operations name;
	// RepositoryName its name on the server (ACL paths).
	Repository     string
	RepositoryName string
	// End is when the newest job was created; the history spans Days
	// before it.
	End  time.Time
	Days int
}

// IssueShape is the catalog of issue 15's benchmark, ending at end. Its
// 80 days of history are within the tasks' default retention (90 days),
// so a server started on it prunes nothing.
func IssueShape(end time.Time) Shape {
	return Shape{VMs: 10_000, Connections: 4, PointsPerVM: 10, Jobs: 1_000_000, PolicyRuns: 100, LogLines: 2,
		Audit: 100_000, Repository: "be0c0ffee0000000000000000000000000000000000000000000000000000001",
		RepositoryName: "default", End: end, Days: 80}
}

// Scaled is the shape divided by div (at least one of each): the same
// mixture, quicker to fill (tests).
func (s Shape) Scaled(div int) Shape {
	d := func(n int) int { return max(1, n/div) }
	s.VMs, s.Jobs, s.PolicyRuns, s.Audit = d(s.VMs), d(s.Jobs), d(s.PolicyRuns), d(s.Audit)
	s.PointsPerVM = min(s.PointsPerVM, s.PolicyRuns)
	return s
}

// Check refuses a shape the model cannot lay out.
func (s Shape) Check() error {
	switch {
	case s.VMs < 1 || s.Connections < 1 || s.Jobs < 1 || s.Days < 1:
		return fmt.Errorf("catalogfill: a shape needs at least one VM, connection, job and day: %+v", s)
	case s.PolicyRuns < 1 || s.PolicyRuns > s.Jobs:
		return fmt.Errorf("catalogfill: %d policy runs among %d jobs: want 1 to %d", s.PolicyRuns, s.Jobs, s.Jobs)
	case s.PointsPerVM > s.PolicyRuns:
		return fmt.Errorf("catalogfill: %d points per VM but only %d policy runs take them", s.PointsPerVM, s.PolicyRuns)
	case s.LogLines < 1:
		return fmt.Errorf("catalogfill: jobs need at least one log line")
	case s.Repository == "" || s.End.IsZero():
		return fmt.Errorf("catalogfill: a shape needs a repository ID and an end time")
	}
	return nil
}

// Points is the number of backup points.
func (s Shape) Points() int { return s.VMs * s.PointsPerVM }

// TaskRows is the number of per-VM task rows (those of policy runs).
func (s Shape) TaskRows() int { return s.PolicyRuns * s.VMs }

// runEvery: job n is a policy run when n is a multiple of it.
func (s Shape) runEvery() int { return s.Jobs / s.PolicyRuns }

// IsPolicyRun says whether job id is a policy run.
func (s Shape) IsPolicyRun(id int64) bool {
	return id%int64(s.runEvery()) == 0 && id/int64(s.runEvery()) <= int64(s.PolicyRuns)
}

// PolicyRun is the ID of the k-th policy run (0: the oldest).
func (s Shape) PolicyRun(k int) int64 { return int64((k + 1) * s.runEvery()) }

// runIndex is k of a policy run's ID.
func (s Shape) runIndex(id int64) int { return int(id/int64(s.runEvery())) - 1 }

// Users who start operations; "@schedule" starts policy runs.
var Users = []string{"admin", "alice", "bob", "carol", "dave", "erin", "frank", "grace"}

// Policy is the policy every run belongs to.
const Policy = "nightly"

// Connection is the name of the c-th connection.
func Connection(c int) string { return fmt.Sprintf("vc%d", c+1) }

// VMName and VMID name VM i.
func VMName(i int) string { return fmt.Sprintf("vm-%05d", i) }
func VMID(i int) string   { return fmt.Sprintf("vm-%d", 1000+i) }

// vmConnection is the connection of VM i.
func (s Shape) vmConnection(i int) string { return Connection(i % s.Connections) }

// created is when job id was created: evenly spread over the days.
func (s Shape) created(id int64) time.Time {
	span := time.Duration(s.Days) * 24 * time.Hour
	step := span / time.Duration(s.Jobs)
	return s.End.Add(-span + time.Duration(id)*step).UTC().Truncate(time.Microsecond)
}

// VM is the inventory record of VM i: one disk; nine VMs in ten are
// selected by the policy.
func (s Shape) VM(i int) catalog.VMRecord {
	ds := fmt.Sprintf("ds-%03d", i%200)
	size := int64(i%64+1) << 30
	v := catalog.VMRecord{Connection: s.vmConnection(i), ID: VMID(i), Name: VMName(i), Host: fmt.Sprintf("esx-%02d", i%50),
		Datastores: []string{ds}, Tags: map[string]string{"tier": []string{"gold", "silver", "bronze"}[i%3]},
		Bytes: size, LastSeen: s.End, PowerState: "running", ChangeTracking: true, GuestAgent: i%2 == 0,
		Disks: []catalog.DiskRecord{{Key: "2000", Name: "Hard disk 1", Size: size, Datastore: ds,
			Path: fmt.Sprintf("[%s] %s/%s.vmdk", ds, VMName(i), VMName(i)), Format: "vmdk"}}}
	if i%10 != 0 {
		v.Policies, v.Protected = []string{Policy}, true
	}
	return v
}

// Job is job id (1..Jobs) as the catalog reads it back.
func (s Shape) Job(id int64) catalog.Job {
	t := s.created(id)
	n := int(id)
	j := catalog.Job{ID: id, Repository: s.Repository, Status: catalog.StatusSuccess, Worker: "backup-1", CreatedAt: t,
		StartedAt: t.Add(time.Second), Owner: catalog.Owner{Host: "backup-1", PID: 1000 + n%50, Start: uint64(n % 7919)}}
	if s.IsPolicyRun(id) {
		j.Kind, j.Policy, j.Object, j.User = catalog.KindBackupPolicy, Policy, "/policies/"+Policy, "@schedule"
		j.TasksTotal = s.VMs
		for i := range s.VMs {
			if s.taskFails(i) {
				j.TasksFail++
			}
		}
		j.TasksOK = j.TasksTotal - j.TasksFail
		if j.TasksFail > 0 {
			j.Status = catalog.StatusPartial
		}
		j.FinishedAt = j.StartedAt.Add(time.Duration(s.VMs) * time.Second / 10)
		j.Progress = catalog.Progress{ItemsDone: int64(s.VMs), ItemsTotal: int64(s.VMs)}
		j.LogLines = int64(s.VMs) + 2
	} else {
		vm := n % s.VMs
		j.User = Users[n%len(Users)]
		switch {
		case n%50 == 1:
			j.Kind, j.Object, j.VM = catalog.KindRestore, "/repositories/"+s.RepositoryName, VMName(vm)
		case n%50 == 2:
			j.Kind, j.Object = catalog.KindVerify, "/repositories/"+s.RepositoryName
		case n%100 == 3:
			j.Kind, j.Object = catalog.KindGC, "/repositories/"+s.RepositoryName
		default:
			j.Kind, j.Object, j.VM = catalog.KindBackupVM, "/connections/"+s.vmConnection(vm)+"/vm/"+VMName(vm), VMName(vm)
		}
		switch {
		case n%97 == 0:
			j.Status, j.Error = catalog.StatusFailed, "snapshot of "+VMName(vm)+" failed: the host did not answer"
		case n%211 == 0:
			j.Status, j.Error = catalog.StatusCancelled, "cancelled by "+j.User
		}
		size := int64(n%64+1) << 30
		j.FinishedAt = j.StartedAt.Add(time.Duration(30+n%300) * time.Second)
		j.Progress = catalog.Progress{BytesDone: size, BytesTotal: size, BytesPerSecond: float64(size) / float64(30+n%300)}
		j.LogLines = int64(s.LogLines)
	}
	j.Heartbeat = j.FinishedAt
	return j
}

func (s Shape) taskFails(vm int) bool { return vm%500 == 499 }

// Task is the task of VM vm in policy run k; its ID is k*VMs+vm+1 in a
// catalog that had no tasks before the fill.
func (s Shape) Task(k, vm int) catalog.Task {
	job := s.Job(s.PolicyRun(k))
	start := job.StartedAt.Add(time.Duration(vm) * time.Second / 10)
	t := catalog.Task{ID: int64(k*s.VMs + vm + 1), JobID: job.ID, Connection: s.vmConnection(vm), VMID: VMID(vm), VMName: VMName(vm),
		Host: fmt.Sprintf("esx-%02d", vm%50), Datastores: []string{fmt.Sprintf("ds-%03d", vm%200)}, Status: catalog.StatusSuccess,
		Mode: "incremental", SnapshotMode: "crash", Attempts: 1, StartedAt: start, FinishedAt: start.Add(90 * time.Second),
		BytesLogical: int64(vm%64+1) << 30, BytesRead: int64(vm%64+1) << 24, BytesStored: int64(vm%64+1) << 22}
	if s.taskFails(vm) {
		t.Status, t.Error, t.BytesRead, t.BytesStored = catalog.StatusFailed, "snapshot failed: datastore full", 0, 0
	} else if p := k - (s.PolicyRuns - s.PointsPerVM); p >= 0 {
		t.BackupPointID, t.SnapshotModeAchieved = PointID(vm, p), "crash"
	}
	return t
}

// PointID is the ID of VM vm's p-th backup point (0: the oldest).
func PointID(vm, p int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "point %d %d", vm, p))
	return hex.EncodeToString(h[:])
}

// Point is VM vm's p-th backup point, taken by the policy run
// PolicyRuns-PointsPerVM+p (the newest runs).
func (s Shape) Point(vm, p int) catalog.BackupPoint {
	task := s.Task(s.PolicyRuns-s.PointsPerVM+p, vm)
	parent := ""
	if p > 0 {
		parent = PointID(vm, p-1)
	}
	return catalog.BackupPoint{Repository: s.Repository, ID: PointID(vm, p), Time: task.StartedAt, Connection: task.Connection,
		VMID: task.VMID, VMName: task.VMName, Mode: "incremental", Parent: parent, Disks: 1 + vm%3, BytesLogical: task.BytesLogical,
		BytesStored: int64(vm%64+1) << 22, Tags: map[string]string{"policy": Policy}, Protected: p == 0 && vm%10 == 0,
		JobID: task.JobID, SnapshotMode: "crash", SnapshotModeAchieved: "crash"}
}

// Log is line seq (1..LogLines) of job id's log.
func (s Shape) Log(id, seq int64) catalog.Event {
	j := s.Job(id)
	e := catalog.Event{JobID: id, Seq: seq, Level: "info"}
	if s.IsPolicyRun(id) {
		switch {
		case seq == 1:
			e.Time, e.Kind, e.Message = j.StartedAt, "inventory", fmt.Sprintf("%d VMs, %d selected", s.VMs, s.VMs)
			e.Fields = map[string]any{"vms": float64(s.VMs), "selected": float64(s.VMs)}
		case seq == j.LogLines:
			e.Time, e.Kind, e.Message = j.FinishedAt, "done", fmt.Sprintf("%d VMs backed up, %d failed", j.TasksOK, j.TasksFail)
		default:
			t := s.Task(s.runIndex(id), int(seq-2))
			e.TaskID, e.Time, e.Kind = t.ID, t.FinishedAt, "vm-done"
			e.Message = t.VMName + " backed up"
			e.Fields = map[string]any{"bytes_read": float64(t.BytesRead), "seconds": float64(90)}
			if t.Status == catalog.StatusFailed {
				e.Level, e.Kind, e.Message, e.Fields = "error", "vm-failed", t.VMName+": "+t.Error, nil
			}
		}
		return e
	}
	switch {
	case seq == j.LogLines:
		e.Time, e.Kind, e.Message = j.FinishedAt, "done", j.Kind+" done"
		e.Fields = map[string]any{"bytes": float64(j.Progress.BytesDone)}
		if j.Error != "" {
			e.Level, e.Kind, e.Message, e.Fields = "error", "failed", j.Error, nil
		}
	default:
		e.Time, e.Kind, e.Message = j.StartedAt.Add(time.Duration(seq)*time.Millisecond), "progress", fmt.Sprintf("step %d", seq)
	}
	return e
}

// AuditRecord is the i-th record of the audit log (ID i+1).
func (s Shape) AuditRecord(i int) catalog.AuditRecord {
	span := time.Duration(s.Days) * 24 * time.Hour
	t := s.End.Add(-span + time.Duration(i)*(span/time.Duration(max(s.Audit, 1)))).UTC().Truncate(time.Microsecond)
	vm := i % s.VMs
	r := catalog.AuditRecord{ID: int64(i + 1), Time: t, User: Users[i%len(Users)], Operation: "backup-vm",
		Object: "/connections/" + s.vmConnection(vm) + "/vm/" + VMName(vm), Result: catalog.AuditOK, RemoteAddr: "192.0.2.10"}
	switch {
	case i%10 == 1:
		r.Operation, r.Object = "restore-disk", "/repositories/"+s.RepositoryName
	case i%10 == 2:
		r.Operation, r.Object = "login", ""
	case i%37 == 0:
		r.Result, r.ErrorClass = catalog.AuditDenied, "denied"
	}
	return r
}

package catalogfill

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// Batch sizes: one transaction each. Large enough that commits cost
// nothing next to the rows, small enough to keep a batch's arguments in
// a few tens of MB.
const (
	rowBatch   = 20_000
	taskBatch  = 5_000
	pointBatch = 5_000
)

// Progress is told each step's end: what was written, how many rows, how
// long it took.
type Progress func(what string, rows int, took time.Duration)

// Fill writes shape s into cat, a catalog opened by catalogopen (so
// migrated) that holds no jobs yet. VMs, per-VM tasks, backup points and
// the audit log go through the catalog's API, in batches as the engine
// writes them; jobs and their logs, which the API writes one job per
// transaction, go straight into the same tables through the driver's bulk
// path, each job with its log's length and each line with its number,
// as AddEvents would have stored them.
func Fill(ctx context.Context, cat catalog.Catalog, s Shape, progress Progress) error {
	if err := s.Check(); err != nil {
		return err
	}
	if progress == nil {
		progress = func(string, int, time.Duration) {}
	}
	sc, ok := cat.(interface{ Backend() sqlcat.Backend })
	if !ok {
		return fmt.Errorf("catalogfill: %T is not an SQL catalog (open it with catalogopen)", cat)
	}
	b := sc.Backend()
	if jobs, err := cat.ListJobs(ctx, catalog.JobFilter{Limit: 1}); err != nil {
		return err
	} else if len(jobs) > 0 {
		return fmt.Errorf("catalogfill: the catalog already holds jobs (job %d): fill a new one", jobs[0].ID)
	}
	steps := []struct {
		what string
		rows int
		fn   func() error
	}{
		{"VMs", s.VMs, func() error { return putVMs(ctx, cat, s) }},
		{"jobs", s.Jobs, func() error { return insertJobs(ctx, b, s) }},
		{"per-VM tasks", s.TaskRows(), func() error { return createTasks(ctx, cat, s) }},
		{"log lines", s.LogLineCount(), func() error { return insertLogs(ctx, b, s) }},
		{"backup points", s.Points(), func() error { return putPoints(ctx, cat, s) }},
		{"audit records", s.Audit, func() error { return appendAudit(ctx, cat, s) }},
		{"statistics", 0, func() error { return analyze(ctx, b) }},
	}
	for _, st := range steps {
		start := time.Now()
		if err := st.fn(); err != nil {
			return fmt.Errorf("catalogfill: %s: %w", st.what, err)
		}
		progress(st.what, st.rows, time.Since(start))
	}
	return nil
}

// LogLineCount is the number of lines of all jobs' logs.
func (s Shape) LogLineCount() int {
	return (s.Jobs-s.PolicyRuns)*s.LogLines + s.PolicyRuns*(s.VMs+2)
}

// putVMs writes each connection's VMs as its inventory, refreshed at
// the history's end (as the server's refresher would have).
func putVMs(ctx context.Context, cat catalog.Catalog, s Shape) error {
	for c := range s.Connections {
		var vms []catalog.VMRecord
		for i := c; i < s.VMs; i += s.Connections {
			vms = append(vms, s.VM(i))
		}
		if err := cat.ReplaceInventory(ctx, Connection(c), s.End, vms); err != nil {
			return err
		}
	}
	return nil
}

// jobColumns are the columns a job row is written with: what
// sqlcat.CreateJob writes, plus its ID and the length of its log.
var jobColumns = []string{"id", "kind", "policy", "repository", "status", "worker", "created_at", "started_at",
	"finished_at", "tasks_total", "tasks_ok", "tasks_fail", "error", "object", "vm", "user_name", "token",
	"bytes_done", "bytes_total", "bytes_per_second", "eta_seconds", "items_done", "items_total", "owner_host",
	"owner_pid", "owner_start", "heartbeat_at", "log_lines"}

var eventColumns = []string{"occurred_at", "job_id", "task_id", "level", "kind", "message", "fields", "seq"}

func insertSQL(d sqlcat.Dialect, table string, cols []string) string {
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")
	return d.Rebind("INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (" + marks + ")")
}

// timeArg binds a time as the driver stores it; zero is NULL.
func timeArg(d sqlcat.Dialect, t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return d.BindTime(t.UTC().Truncate(time.Microsecond))
}

// jsonArg is JSON text, NULL when empty (as sqlcat stores it).
func jsonArg[T any](v T, n int) any {
	if n == 0 {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and numbers
	}
	return string(b)
}

func insertJobs(ctx context.Context, b sqlcat.Backend, s Shape) error {
	d := b.Dialect()
	q := insertSQL(d, "jobs", jobColumns)
	for first := int64(1); first <= int64(s.Jobs); first += rowBatch {
		rows := make([][]any, 0, rowBatch)
		for id := first; id < first+rowBatch && id <= int64(s.Jobs); id++ {
			j := s.Job(id)
			p := j.Progress
			rows = append(rows, []any{j.ID, j.Kind, j.Policy, j.Repository, string(j.Status), j.Worker, timeArg(d, j.CreatedAt),
				timeArg(d, j.StartedAt), timeArg(d, j.FinishedAt), j.TasksTotal, j.TasksOK, j.TasksFail, j.Error, j.Object, j.VM,
				j.User, j.Token, p.BytesDone, p.BytesTotal, p.BytesPerSecond, int64(p.ETA / time.Second), p.ItemsDone,
				p.ItemsTotal, j.Owner.Host, j.Owner.PID, int64(j.Owner.Start), timeArg(d, j.Heartbeat), j.LogLines})
		}
		if err := b.Write(ctx, func(tx sqlcat.Tx) error { return tx.BulkInsert(ctx, "jobs", jobColumns, q, rows) }); err != nil {
			return err
		}
	}
	if d.Name == "postgres" {
		// Explicit IDs do not move the identity's sequence: the next
		// CreateJob must not take ID 1 again.
		return b.Write(ctx, func(tx sqlcat.Tx) error {
			_, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('jobs', 'id'), (SELECT MAX(id) FROM jobs))`)
			return err
		})
	}
	return nil // SQLite's AUTOINCREMENT continues after the largest ID
}

func createTasks(ctx context.Context, cat catalog.Catalog, s Shape) error {
	for k := range s.PolicyRuns {
		for i := 0; i < s.VMs; i += taskBatch {
			batch := make([]*catalog.Task, 0, taskBatch)
			for vm := i; vm < min(i+taskBatch, s.VMs); vm++ {
				t := s.Task(k, vm)
				batch = append(batch, &t)
			}
			want := batch[0].ID
			if err := cat.CreateTasks(ctx, batch); err != nil {
				return err
			}
			if batch[0].ID != want {
				return fmt.Errorf("the first task of run %d got ID %d, not %d: the catalog held tasks before", k, batch[0].ID, want)
			}
		}
	}
	return nil
}

func insertLogs(ctx context.Context, b sqlcat.Backend, s Shape) error {
	d := b.Dialect()
	q := insertSQL(d, "events", eventColumns)
	rows := make([][]any, 0, rowBatch)
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		err := b.Write(ctx, func(tx sqlcat.Tx) error { return tx.BulkInsert(ctx, "events", eventColumns, q, rows) })
		rows = rows[:0]
		return err
	}
	for id := int64(1); id <= int64(s.Jobs); id++ {
		lines := int64(s.LogLines)
		if s.IsPolicyRun(id) {
			lines = int64(s.VMs) + 2
		}
		for seq := int64(1); seq <= lines; seq++ {
			e := s.Log(id, seq)
			var task any
			if e.TaskID != 0 {
				task = e.TaskID
			}
			rows = append(rows, []any{timeArg(d, e.Time), e.JobID, task, e.Level, e.Kind, e.Message, jsonArg(e.Fields, len(e.Fields)), e.Seq})
			if len(rows) == rowBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

func putPoints(ctx context.Context, cat catalog.Catalog, s Shape) error {
	batch := make([]catalog.BackupPoint, 0, pointBatch)
	for vm := range s.VMs {
		for p := range s.PointsPerVM {
			batch = append(batch, s.Point(vm, p))
			if len(batch) == pointBatch {
				if err := cat.PutBackupPoints(ctx, batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
	}
	return cat.PutBackupPoints(ctx, batch)
}

func appendAudit(ctx context.Context, cat catalog.Catalog, s Shape) error {
	for i := 0; i < s.Audit; i += rowBatch {
		batch := make([]catalog.AuditRecord, 0, rowBatch)
		for k := i; k < min(i+rowBatch, s.Audit); k++ {
			r := s.AuditRecord(k)
			r.ID = 0
			batch = append(batch, r)
		}
		if err := cat.AppendAudit(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// analyze lets PostgreSQL's planner know the tables' sizes now rather
// than when autovacuum gets to them (a server that grew to this size
// over months has statistics). SQLite's catalog never gathers
// statistics, so neither does the fill.
func analyze(ctx context.Context, b sqlcat.Backend) error {
	if b.Dialect().Name != "postgres" {
		return nil
	}
	return b.Write(ctx, func(tx sqlcat.Tx) error {
		_, err := tx.Exec(ctx, "ANALYZE")
		return err
	})
}

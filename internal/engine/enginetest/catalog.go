// Package enginetest holds test doubles for code that drives the engine:
// an in-memory catalog (the real ones live in catalog/sqlite and
// catalog/postgres and pass catalogtest).
package enginetest

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Catalog is an in-memory catalog.Catalog for tests. Safe for concurrent
// use; Writes counts write calls.
type Catalog struct {
	noNotifications
	mu     sync.Mutex
	jobs   []catalog.Job
	tasks  map[int64]catalog.Task
	events []catalog.Event
	points map[string]catalog.BackupPoint
	vms    map[string]catalog.VMRecord
	nextID int64
	Writes int
	// The engine keeps no access-control records, reads no configuration
	// objects or inventory, takes no leases and knows no media: calling
	// one of their methods is a test bug, and panics on the nil interface.
	catalog.AccessStore
	catalog.ConfigObjects
	catalog.Leases
	catalog.MediaCatalog
	catalog.Workers      // the fleet's registry: no engine reads it
	catalog.WorkerEvents // a worker's fenced writes: no engine makes them
	catalog.Inventory    // the server's inventory: no engine reads it
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{tasks: map[int64]catalog.Task{}, points: map[string]catalog.BackupPoint{}, vms: map[string]catalog.VMRecord{}}
}

var _ catalog.Catalog = (*Catalog)(nil)

func (m *Catalog) id() int64 { m.nextID++; return m.nextID }

func (m *Catalog) CreateJob(_ context.Context, j *catalog.Job) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Writes++
	j.ID = m.id()
	j.LogLines, j.CancelRequested = 0, time.Time{}
	m.jobs = append(m.jobs, *j)
	return nil
}

func (m *Catalog) UpdateJob(_ context.Context, j *catalog.Job) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Writes++
	old := m.job(j.ID)
	if old == nil {
		return catalog.ErrNotFound
	}
	u := *j
	u.CancelRequested, u.LogLines = old.CancelRequested, old.LogLines
	*old = u
	return nil
}

func (m *Catalog) GetJob(_ context.Context, id int64) (catalog.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return catalog.Job{}, catalog.ErrNotFound
}

func (m *Catalog) ListJobs(_ context.Context, f catalog.JobFilter) ([]catalog.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []catalog.Job
	for i := len(m.jobs) - 1; i >= 0; i-- {
		j := m.jobs[i]
		if (f.Policy == "" || j.Policy == f.Policy) && (f.Status == "" || j.Status == f.Status) &&
			(f.Kind == "" || j.Kind == f.Kind) && (!f.Unfinished || !j.Status.Done()) && (f.AboveID == 0 || j.ID > f.AboveID) &&
			(len(f.IDs) == 0 || slices.Contains(f.IDs, j.ID)) {
			out = append(out, j)
		}
	}
	return out, nil
}

func (m *Catalog) CreateTasks(_ context.Context, ts []*catalog.Task) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Writes++
	for _, t := range ts {
		t.ID = m.id()
		m.tasks[t.ID] = *t
	}
	return nil
}

func (m *Catalog) UpdateTasks(_ context.Context, ts []*catalog.Task) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Writes++
	for _, t := range ts {
		m.tasks[t.ID] = *t
	}
	return nil
}

func (m *Catalog) SupersedeTask(_ context.Context, job int64, connection, vmID, msg string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Writes++
	point := ""
	for id, t := range m.tasks {
		if t.JobID != job || t.Connection != connection || t.VMID != vmID {
			continue
		}
		switch t.Status {
		case catalog.StatusQueued, catalog.StatusRunning:
			t.Status, t.Error, t.FinishedAt = catalog.StatusCancelled, msg, time.Now()
			m.tasks[id] = t
		case catalog.StatusSuccess:
			point = t.BackupPointID
		}
	}
	return point, nil
}

func (m *Catalog) GetTask(_ context.Context, id int64) (catalog.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[id]
	if !ok {
		return t, catalog.ErrNotFound
	}
	return t, nil
}

func (m *Catalog) ListTasks(_ context.Context, f catalog.TaskFilter) ([]catalog.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []catalog.Task
	for _, t := range m.tasks {
		if (f.JobID == 0 || t.JobID == f.JobID) && (f.VMID == "" || t.VMID == f.VMID) && (f.Status == "" || t.Status == f.Status) &&
			t.ID > f.AfterID {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (m *Catalog) AddEvents(_ context.Context, es []catalog.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Writes++
	for i := range es {
		if es[i].JobID != 0 {
			j := m.job(es[i].JobID)
			if j == nil {
				return catalog.ErrNotFound
			}
			j.LogLines++
			es[i].Seq = j.LogLines
		}
		e := es[i]
		e.ID = m.id()
		m.events = append(m.events, e)
	}
	return nil
}

func (m *Catalog) job(id int64) *catalog.Job {
	for i := range m.jobs {
		if m.jobs[i].ID == id {
			return &m.jobs[i]
		}
	}
	return nil
}

func (m *Catalog) JobLog(_ context.Context, jobID, after int64, limit int) ([]catalog.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []catalog.Event
	for _, e := range m.events {
		if e.JobID == jobID && e.Seq > after && (limit == 0 || len(out) < limit) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *Catalog) Heartbeat(_ context.Context, id int64, p *catalog.Progress) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(id)
	if j == nil || j.Status.Done() {
		return time.Time{}, catalog.ErrNotFound
	}
	j.Heartbeat = time.Now()
	if p != nil {
		j.Progress = *p
	}
	return j.CancelRequested, nil
}

func (m *Catalog) RequestCancel(_ context.Context, id int64, msg string) (catalog.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(id)
	if j == nil {
		return catalog.Job{}, catalog.ErrNotFound
	}
	if j.Status.Done() {
		return *j, catalog.ErrFinished
	}
	if j.CancelRequested.IsZero() {
		j.CancelRequested = time.Now()
	}
	if msg != "" {
		j.LogLines++
		m.events = append(m.events, catalog.Event{ID: m.id(), Time: time.Now(), JobID: id, Seq: j.LogLines, Level: "warn", Kind: "cancel", Message: msg})
	}
	return *j, nil
}

func (m *Catalog) AbandonJob(_ context.Context, id int64, lastSeen time.Time, status catalog.Status, msg string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(id)
	if j == nil || j.Status.Done() || !j.Heartbeat.Equal(lastSeen) {
		return false, nil
	}
	j.Status, j.Error, j.FinishedAt = status, msg, time.Now()
	j.LogLines++
	m.events = append(m.events, catalog.Event{ID: m.id(), Time: j.FinishedAt, JobID: id, Seq: j.LogLines, Level: "error", Kind: "abandoned", Message: msg})
	return true, nil
}

// PruneHistory keeps everything: tests of the engine do not age.
func (m *Catalog) PruneHistory(context.Context, time.Time, int) (int, error) { return 0, nil }

// WatchJobs is unsupported, as in SQLite: readers poll.
func (m *Catalog) WatchJobs(context.Context) (<-chan catalog.JobNotice, error) {
	return nil, errors.ErrUnsupported
}

func (m *Catalog) ListEvents(_ context.Context, f catalog.EventFilter) ([]catalog.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []catalog.Event
	for _, e := range m.events {
		if (f.JobID == 0 || e.JobID == f.JobID) && (f.TaskID == 0 || e.TaskID == f.TaskID) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *Catalog) PutBackupPoints(_ context.Context, ps []catalog.BackupPoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Writes++
	for _, p := range ps {
		m.points[p.Repository+"/"+p.ID] = p
	}
	return nil
}

func (m *Catalog) DeleteBackupPoints(_ context.Context, repository string, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.points, repository+"/"+id)
	}
	return nil
}

func (m *Catalog) ListBackupPoints(_ context.Context, f catalog.BackupPointFilter) ([]catalog.BackupPoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []catalog.BackupPoint
	before := func(a, b catalog.BackupPoint) bool { // a is listed before b
		if !a.Time.Equal(b.Time) {
			return a.Time.After(b.Time)
		}
		if a.ID != b.ID {
			return a.ID > b.ID
		}
		return a.Repository < b.Repository
	}
	after := catalog.BackupPoint{Time: f.After.Time, ID: f.After.ID, Repository: f.After.Repository}
	for _, p := range m.points {
		if (f.Repository == "" || p.Repository == f.Repository) && (f.VMID == "" || p.VMID == f.VMID) && (f.VMName == "" || p.VMName == f.VMName) &&
			(f.After.ID == "" || before(after, p)) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return before(out[i], out[j]) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (m *Catalog) NewestBackupPoints(_ context.Context, vms []catalog.VMRef) ([]catalog.BackupPoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	newest := map[catalog.VMRef]catalog.BackupPoint{}
	for _, p := range m.points {
		k := catalog.VMRef{Connection: p.Connection, ID: p.VMID}
		if n, ok := newest[k]; !ok || p.Time.After(n.Time) || p.Time.Equal(n.Time) && p.ID > n.ID {
			newest[k] = p
		}
	}
	var out []catalog.BackupPoint
	for _, vm := range vms {
		if p, ok := newest[vm]; ok {
			out = append(out, p)
			delete(newest, vm)
		}
	}
	return out, nil
}

func (m *Catalog) NewestPolicyPointTimes(context.Context) ([]catalog.PolicyPointTime, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	type key struct{ conn, vm, policy string }
	newest := map[key]time.Time{}
	for _, p := range m.points {
		k := key{p.Connection, p.VMName, p.Tags["policy"]}
		if p.Time.After(newest[k]) {
			newest[k] = p.Time
		}
	}
	out := make([]catalog.PolicyPointTime, 0, len(newest))
	for k, t := range newest {
		out = append(out, catalog.PolicyPointTime{Connection: k.conn, VMName: k.vm, Policy: k.policy, Time: t})
	}
	return out, nil
}

func (m *Catalog) NewestPointTimes(context.Context) (map[catalog.VMRef]time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[catalog.VMRef]time.Time{}
	for _, p := range m.points {
		k := catalog.VMRef{Connection: p.Connection, ID: p.VMID}
		if p.Time.After(out[k]) {
			out[k] = p.Time
		}
	}
	return out, nil
}

func (m *Catalog) ReplaceBackupPoints(ctx context.Context, repository string, ps []catalog.BackupPoint) error {
	m.mu.Lock()
	for k, p := range m.points {
		if p.Repository == repository {
			delete(m.points, k)
		}
	}
	m.mu.Unlock()
	return m.PutBackupPoints(ctx, ps)
}

func (m *Catalog) PutVMs(_ context.Context, vms []catalog.VMRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range vms {
		m.vms[v.Connection+"/"+v.ID] = v
	}
	return nil
}

func (m *Catalog) ListVMs(context.Context) ([]catalog.VMRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []catalog.VMRecord
	for _, v := range m.vms {
		out = append(out, v)
	}
	return out, nil
}

func (m *Catalog) Close() error { return nil }

// EventsOf returns the events of a job with a given kind ("" for all).
func (m *Catalog) EventsOf(job int64, kind string) []catalog.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []catalog.Event
	for _, e := range m.events {
		if e.JobID == job && (kind == "" || e.Kind == kind) {
			out = append(out, e)
		}
	}
	return out
}

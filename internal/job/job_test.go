package job_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/job"
)

// openCatalog opens a handle to the SQLite catalog at path, as a process
// does; each call is another handle to the same file.
func openCatalog(t *testing.T, path string) catalog.Catalog {
	t.Helper()
	c, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newCatalog(t *testing.T) (catalog.Catalog, string) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	return openCatalog(t, path), path
}

// newManager starts a manager that polls quickly (tests wait on events,
// never on time) and prunes only when asked.
func newManager(t *testing.T, cat catalog.Catalog, o job.Options) *job.Manager {
	t.Helper()
	if o.PollInterval == 0 {
		o.PollInterval = 10 * time.Millisecond
	}
	if o.PruneEvery == 0 {
		o.PruneEvery = -1
	}
	m, err := job.New(context.Background(), cat, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func messages(lines []job.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("%d:%s", l.Seq, l.Message)
	}
	return out
}

func TestStartLogProgressFinish(t *testing.T) {
	cat, path := newCatalog(t)
	m := newManager(t, cat, job.Options{User: "root", Worker: "w1"})
	ctx := job.WithUser(context.Background(), job.User{Name: "alice@pam", Token: "alice@pam!ci"})
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindVerify, Object: "/repositories/main", Repository: "main"}))
	h.Log("info", "reading packs", map[string]any{"packs": 3})
	h.Logf("%d of %d packs read", 1, 3)
	h.Progress(job.Progress{BytesDone: 10, BytesTotal: 30, ItemsDone: 1, ItemsTotal: 3})
	ok(t, h.Flush(ctx))

	got := must[job.Record](t)(m.Get(ctx, h.ID()))
	if got.Kind != job.KindVerify || got.Object != "/repositories/main" || got.User != "alice@pam" || got.Token != "alice@pam!ci" ||
		got.Status != catalog.StatusRunning || got.Worker != "w1" || got.Owner != m.Owner() || got.LogLines != 2 || got.StartedAt.IsZero() {
		t.Fatalf("running task: %+v", got)
	}
	// The last sample is written with the end, even if its turn had not come.
	last := job.Progress{BytesDone: 30, BytesTotal: 30, ItemsDone: 3, ItemsTotal: 3}
	h.Progress(last)
	fin := must[job.Record](t)(h.Finish(ctx, catalog.StatusSuccess, ""))
	if h.Context().Err() == nil {
		t.Fatal("a finished task's context is still live")
	}
	if _, err := h.Finish(ctx, catalog.StatusFailed, "again"); err == nil {
		t.Fatal("a task finished twice")
	}
	// A restart: another process reads the same task.
	got = must[job.Record](t)(newManager(t, openCatalog(t, path), job.Options{}).Get(ctx, h.ID()))
	same(t, "finished task after a restart", got, fin)
	if got.Status != catalog.StatusSuccess || got.FinishedAt.IsZero() || got.Progress != last {
		t.Fatalf("finished task: %+v", got)
	}

	same(t, "whole log", messages(must[[]job.Line](t)(m.Log(ctx, h.ID(), 0, 0))), []string{"1:reading packs", "2:1 of 3 packs read"})
	same(t, "a page", messages(must[[]job.Line](t)(m.Log(ctx, h.ID(), 1, 1))), []string{"2:1 of 3 packs read"})
	same(t, "past the end", must[[]job.Line](t)(m.Log(ctx, h.ID(), 2, 10)), []job.Line{})
	if _, err := m.Log(ctx, h.ID()+100, 0, 0); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("log of a missing task: %v", err)
	}
	for _, bad := range [][2]int64{{-1, 10}, {0, -1}, {0, 10001}} {
		if _, err := m.Log(ctx, h.ID(), bad[0], int(bad[1])); !errors.Is(err, job.ErrInvalid) {
			t.Fatalf("log from %d, limit %d: %v", bad[0], bad[1], err)
		}
	}
}

// A task started without a user in its context is the manager's user (the
// local user of a command), and a queued task starts when Begin says so.
func TestDefaultUserAndQueuedTasks(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{User: "root"})
	ctx := context.Background()
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindGC, Queued: true}))
	got := must[job.Record](t)(m.Get(ctx, h.ID()))
	if got.User != "root" || got.Status != catalog.StatusQueued || !got.StartedAt.IsZero() {
		t.Fatalf("queued task: %+v", got)
	}
	ok(t, h.Begin(ctx))
	got = must[job.Record](t)(m.Get(ctx, h.ID()))
	if got.Status != catalog.StatusRunning || got.StartedAt.IsZero() {
		t.Fatalf("begun task: %+v", got)
	}
	fin := must[job.Record](t)(h.End(ctx, errors.New("disk full")))
	if fin.Status != catalog.StatusFailed || fin.Error != "disk full" {
		t.Fatalf("task ended by an error: %+v", fin)
	}
	if _, err := m.Start(ctx, job.Spec{}); !errors.Is(err, job.ErrInvalid) {
		t.Fatalf("a task without a kind: %v", err)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{})
	ctx := context.Background()
	var ids []int64
	for i, s := range []job.Spec{
		{Kind: job.KindVerify, User: "alice", Object: "/repositories/main"},
		{Kind: job.KindRestoreVM, User: "bob", VM: "web", Object: "/connections/kvm1/vm/web"},
		{Kind: job.KindVerify, User: "bob", Object: "/repositories/main"},
		{Kind: job.KindGC, User: "alice", Object: "/repositories/main"},
		{Kind: job.KindCopy, User: "carol"},
	} {
		h := must[*job.Handle](t)(m.Start(ctx, s))
		ids = append(ids, h.ID())
		if i%2 == 0 {
			must[job.Record](t)(h.Finish(ctx, catalog.StatusSuccess, ""))
		} else {
			defer h.Finish(ctx, catalog.StatusCancelled, "test over")
		}
	}
	list := func(f job.Filter) ([]int64, string) {
		t.Helper()
		p := must[job.Page](t)(m.List(ctx, f))
		out := []int64{}
		for _, j := range p.Tasks {
			out = append(out, j.ID)
		}
		return out, p.Next
	}
	got, next := list(job.Filter{Kind: job.KindVerify})
	same(t, "verify tasks", got, []int64{ids[2], ids[0]})
	same(t, "no next page", next, "")
	got, _ = list(job.Filter{User: "bob", Status: catalog.StatusRunning})
	same(t, "bob's running tasks", got, []int64{ids[1]})
	got, _ = list(job.Filter{VM: "web"})
	same(t, "tasks on VM web", got, []int64{ids[1]})
	got, _ = list(job.Filter{Object: "/repositories/main", User: "alice"})
	same(t, "alice's tasks on main", got, []int64{ids[3], ids[0]})

	var paged []int64
	f := job.Filter{Limit: 2}
	for range len(ids) {
		page, next := list(f)
		paged = append(paged, page...)
		if next == "" {
			break
		}
		f.Cursor = next
	}
	same(t, "pages", paged, []int64{ids[4], ids[3], ids[2], ids[1], ids[0]})

	for _, bad := range []job.Filter{{Cursor: "yesterday"}, {Cursor: "12.x"}, {Limit: -1}, {Limit: 1001}} {
		if _, err := m.List(ctx, bad); !errors.Is(err, job.ErrInvalid) {
			t.Fatalf("list %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// Old finished tasks go with their logs; recent ones and unfinished ones
// stay, whatever their age.
func TestPruneHistory(t *testing.T) {
	cat, _ := newCatalog(t)
	ctx := context.Background()
	now := time.Now()
	mk := func(age time.Duration, status catalog.Status, lines int) int64 {
		j := &catalog.Job{Kind: job.KindVerify, Status: status, CreatedAt: now.Add(-age - time.Hour)}
		if status.Done() {
			j.FinishedAt = now.Add(-age)
		} else {
			j.Owner, j.Heartbeat = catalog.Owner{Host: "elsewhere"}, now // alive elsewhere: not interrupted
		}
		ok(t, cat.CreateJob(ctx, j))
		var es []catalog.Event
		for range lines {
			es = append(es, catalog.Event{JobID: j.ID, Kind: "log"})
		}
		ok(t, cat.AddEvents(ctx, es))
		return j.ID
	}
	old := []int64{mk(40*24*time.Hour, catalog.StatusSuccess, 7), mk(31*24*time.Hour, catalog.StatusFailed, 2)}
	kept := []int64{mk(29*24*time.Hour, catalog.StatusSuccess, 3), mk(0, catalog.StatusRunning, 4)}
	m := newManager(t, cat, job.Options{Retention: 30 * 24 * time.Hour, PruneBatch: 3})
	n := must[int](t)(m.Prune(ctx))
	same(t, "rows pruned", n, 7+2+2)
	for _, id := range old {
		if _, err := m.Get(ctx, id); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("old task %d after pruning: %v", id, err)
		}
	}
	for _, id := range kept {
		must[job.Record](t)(m.Get(ctx, id))
	}
	keepAll := newManager(t, cat, job.Options{Retention: -1})
	same(t, "rows pruned with retention off", must[int](t)(keepAll.Prune(ctx)), 0)
}

// TestMain runs the helper process of the process tests when asked to.
func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// A line whose fields cannot be stored does not block the log: it is
// recorded with the reason instead of its fields.
func TestUnrecordableFieldsDoNotBlockTheLog(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{})
	ctx := context.Background()
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindCopy}))
	h.Log("info", "odd", map[string]any{"ch": make(chan int)})
	h.Log("info", "fine", map[string]any{"n": 1})
	must[job.Record](t)(h.Finish(ctx, catalog.StatusSuccess, ""))
	lines := must[[]job.Line](t)(m.Log(ctx, h.ID(), 0, 0))
	same(t, "log", messages(lines), []string{"1:odd", "2:fine"})
	if _, ok := lines[0].Fields["unrecordable_fields"]; !ok {
		t.Fatalf("fields of the odd line: %v", lines[0].Fields)
	}
}

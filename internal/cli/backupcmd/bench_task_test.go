package backupcmd_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/measure"
)

// TestBenchPipelineAsTask: `coffer --server URL bench pipeline` measures
// the server's pipeline as a task (start-bench-pipeline) that answers at
// once; the task's log gets the results and the planner reads them once
// it has succeeded. The API refuses what it cannot measure before any
// task starts (1,024 workers, within the schema, beyond 4 per core of
// the server), answers the largest measurement it takes (1 TiB, 4
// workers per core, 20 levels) at once with a running task, refuses a
// second measurement while one runs, and cancels it on request.
func TestBenchPipelineAsTask(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	srv := e.StartServer()
	defer func() { _ = srv.Stop() }()
	token := e.AdminToken()
	const start = "/system/bench/pipeline/start"

	twenty := make([]int, 20)
	for _, bad := range []struct {
		body api.PipelineBenchRequest
		want int
	}{
		{api.PipelineBenchRequest{SizeBytes: 1<<40 + 1}, 422},
		{api.PipelineBenchRequest{Workers: 1025}, 422},
		{api.PipelineBenchRequest{Workers: 4*runtime.NumCPU() + 1}, 400},
		{api.PipelineBenchRequest{Levels: append(twenty, 0)}, 422},
		{api.PipelineBenchRequest{Levels: []int{20}}, 400},
		{api.PipelineBenchRequest{SizeBytes: 1 << 10}, 400},
	} {
		if code, _ := srv.Call(token, "POST", start, bad.body, nil); code != bad.want {
			t.Errorf("start-bench-pipeline %+v: HTTP %d, want %d", bad.body, code, bad.want)
		}
	}
	var jobs []api.Job
	if code, _ := srv.Call(token, "GET", "/jobs?kind=bench-pipeline", nil, &jobs); code != 200 || len(jobs) != 0 {
		t.Fatalf("tasks after refused measurements: HTTP %d %+v", code, jobs)
	}

	// The extremes: at level 0 (no compression), so that the workers
	// cost no memory while they run until the cancel.
	var big api.Job
	most := api.PipelineBenchRequest{SizeBytes: 1 << 40, Workers: 4 * runtime.NumCPU(), Levels: twenty}
	if code, _ := srv.Call(token, "POST", start, most, &big); code != 200 ||
		big.Kind != "bench-pipeline" || big.Status != "running" {
		t.Fatalf("a measurement of 1 TiB: HTTP %d %+v, want the running task at once", code, big)
	}
	if code, _ := srv.Call(token, "POST", start, api.PipelineBenchRequest{}, nil); code != 409 {
		t.Errorf("a second measurement while one runs: HTTP %d, want 409", code)
	}
	id := strconv.FormatInt(big.ID, 10)
	if code, out, errOut := e.Remote(srv, token, "job", "cancel", id); code != 0 {
		t.Fatalf("job cancel %s: exit %d\n%s%s", id, code, out, errOut)
	}
	if code, out, errOut := e.Remote(srv, token, "job", "follow", id); code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("job follow %s after its cancel: exit %d\n%s%s", id, code, out, errOut)
	}

	// Through the command line, a small one to its end.
	code, out, errOut := e.Remote(srv, token, "bench", "pipeline", "--size", "4MiB", "--level", "1", "--workers", "2", "--json")
	if code != 0 {
		t.Fatalf("bench pipeline --server: exit %d\n%s%s", code, out, errOut)
	}
	j := clitest.Decode[api.Job](t, out)
	if j.Kind != "bench-pipeline" || j.ID == big.ID {
		t.Fatalf("bench pipeline --server answered %+v, want a new bench-pipeline task", j)
	}
	id = strconv.FormatInt(j.ID, 10)
	if code, out, errOut := e.Remote(srv, token, "job", "follow", id); code != 0 || !strings.Contains(out, "level 1: ") ||
		!strings.Contains(out, "success") {
		t.Fatalf("job follow %s: exit %d, want its results and success\n%s%s", id, code, out, errOut)
	}
	cat, err := catalogopen.Open(context.Background(), e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	_, p, err := measure.Latest(context.Background(), cat, 10)
	if err != nil || p == nil || len(p.Results) != 1 || p.Results[0].Level != 1 || p.Results[0].Workers != 2 || p.Results[0].Rate <= 0 {
		t.Fatalf("the planner's newest pipeline measurement: %+v, %v; want the task's, at level 1 with 2 workers", p, err)
	}
}

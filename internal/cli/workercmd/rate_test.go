package workercmd_test

import (
	"context"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// rateConfig: three connections, one per worker, of 2 VMs of 8 MiB (about 3.5 MiB of data each), under
// limits.rate 3 MiB/s and 3 tasks at once: each unit's share is 1 MiB/s.
const rateConfig = `
maintenance: {worker-dead-after: 10s}
limits: {tasks: 3, rate: 3MiB/s}
connections:
  - {name: c1, kind: fake, options: {seed: 41, vms: 2, hosts: 1, datastores: 1, disk-size: 8MiB}}
  - {name: c2, kind: fake, options: {seed: 42, vms: 2, hosts: 1, datastores: 1, disk-size: 8MiB}}
  - {name: c3, kind: fake, options: {seed: 43, vms: 2, hosts: 1, datastores: 1, disk-size: 8MiB}}
policies:
  - {name: fleet, connections: [c1, c2, c3], schedule: "0 3 1 1 *"}
`

const (
	rateLimit = 3 << 20 // limits.rate, bytes/s
	rateTasks = 3       // limits.tasks
	rateShare = rateLimit / rateTasks
)

var unitEndRE = regexp.MustCompile(`time=(\S+) level=INFO msg="VM unit ends" vm=\S+ job=(\d+) task=(\d+) .*?seconds=([0-9.e+-]+)`)

// TestRateHeldAcrossWorkers: limits.rate bounds the bytes read by a
// policy's run in total, but a unit on a worker reads in another process,
// which no bucket of the server's reaches (before, a worker applied only
// task-rate). Each unit now reads at most its share, rate × its slots of
// the global pool / tasks; the global pool bounds the units in flight
// across the three workers, so the shares add up to at most rate. The
// test reads each unit's time from its worker's log and its bytes from
// the catalog: no unit read faster than its share, never more than tasks
// units ran at once, and the run read no faster than rate in total. Each
// unit's bucket starts empty: units starting together on several workers
// would otherwise each read a second's worth at once.
func TestRateHeldAcrossWorkers(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	e.Config(rateConfig)
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	var workers []*clitest.ServerProc
	for i, name := range []string{"kvm1", "kvm2", "kvm3"} {
		workers = append(workers, startLossWorker(e, name, "--reach-connections", "c"+strconv.Itoa(i+1)))
	}
	waitLog(t, srv, "the engine given the workers", "workers=kvm1,kvm2,kvm3")
	j := srv.RunPolicy(token, "fleet")
	if j.Status != "success" || j.TasksOK != 6 {
		t.Fatalf("run fleet: %+v\n%s", j, srv.Log())
	}
	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]int64{}
	var total int64
	for _, task := range tasks {
		read[strconv.FormatInt(task.ID, 10)] = task.BytesRead
		total += task.BytesRead
		if task.BytesRead < 2*rateShare {
			t.Fatalf("task %d read %d bytes: too few to tell its rate from its share (%d bytes/s)", task.ID, task.BytesRead, rateShare)
		}
	}
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	units := 0
	var first, last time.Time
	for _, w := range workers {
		for _, m := range unitEndRE.FindAllStringSubmatch(w.Log(), -1) {
			if m[2] != strconv.FormatInt(j.ID, 10) {
				continue
			}
			end := logTime(t, m[1])
			secs, _ := strconv.ParseFloat(m[4], 64)
			start := end.Add(-time.Duration(secs * float64(time.Second)))
			bytes := read[m[3]]
			// Its bucket starts empty (ratelimit.Shared), and each read
			// waits for its bytes first.
			least := float64(bytes) / rateShare
			if secs < least*0.98 {
				t.Errorf("task %s read %d bytes in %.2f s: %.2f MiB/s, faster than its share of %.2f MiB/s allows (%.2f s at least)",
					m[3], bytes, secs, float64(bytes)/secs/(1<<20), float64(rateShare)/(1<<20), least)
			}
			edges = append(edges, edge{start, 1}, edge{end, -1})
			units++
			if first.IsZero() || start.Before(first) {
				first = start
			}
			if end.After(last) {
				last = end
			}
		}
	}
	if units != 6 {
		t.Fatalf("the workers logged %d units of job %d, want 6", units, j.ID)
	}
	sort.Slice(edges, func(a, b int) bool {
		if !edges[a].at.Equal(edges[b].at) {
			return edges[a].at.Before(edges[b].at)
		}
		return edges[a].delta < edges[b].delta
	})
	at, peak := 0, 0
	for _, e := range edges {
		at += e.delta
		peak = max(peak, at)
	}
	if peak > rateTasks {
		t.Errorf("%d units ran at once on the workers, more than limits.tasks %d", peak, rateTasks)
	}
	wall := last.Sub(first).Seconds()
	if got := float64(total) / wall; got > rateLimit*1.02 {
		t.Errorf("the workers read %.2f MiB/s in total, over limits.rate", got/(1<<20))
	}
	t.Logf("6 units on 3 workers read %d bytes in %.2f s: %.2f MiB/s in total under limits.rate %.0f MiB/s, at most %d units at once",
		total, wall, float64(total)/wall/(1<<20), float64(rateLimit)/(1<<20), peak)
}

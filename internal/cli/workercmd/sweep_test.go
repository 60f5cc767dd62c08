package workercmd_test

import (
	"bufio"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// unitSpan is one VM unit as a worker logged it (internal/fleet
// RunVMUnit): its start and end on that worker, and what it held.
type unitSpan struct {
	Worker, Connection, VM, Host string
	Datastores                   []string
	Job, Task                    int64
	Attempt                      int
	Start, End                   time.Time
}

// unitLine is a worker's JSON log line of a unit's start or end.
type unitLine struct {
	Time       time.Time `json:"time"`
	Msg        string    `json:"msg"`
	Worker     string    `json:"worker"`
	Connection string    `json:"connection"`
	VM         string    `json:"vm_name"`
	Host       string    `json:"host"`
	Datastores []string  `json:"datastores"`
	Job        int64     `json:"job"`
	Task       int64     `json:"task"`
	Attempt    int       `json:"attempt"`
	Err        any       `json:"err"`
}

// sweepUnits reads every worker process's log for its units' starts and
// ends. Each unit must start and end once, on the worker that logged it,
// without an error.
func sweepUnits(t *testing.T, workers map[string]*clitest.ServerProc) []unitSpan {
	t.Helper()
	type key struct {
		job, task int64
		attempt   int
	}
	spans := map[key]*unitSpan{}
	for name, w := range workers {
		sc := bufio.NewScanner(strings.NewReader(w.Log()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l unitLine
			if !strings.Contains(sc.Text(), `"VM unit `) || json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			k := key{l.Job, l.Task, l.Attempt}
			sp := spans[k]
			switch {
			case l.Worker != name:
				t.Errorf("worker %s logged a unit of worker %s: %s", name, l.Worker, sc.Text())
			case l.Msg == "VM unit starts" && sp == nil:
				spans[k] = &unitSpan{Worker: name, Connection: l.Connection, VM: l.VM, Host: l.Host, Datastores: l.Datastores,
					Job: l.Job, Task: l.Task, Attempt: l.Attempt, Start: l.Time}
			case l.Msg == "VM unit ends" && sp != nil && sp.End.IsZero() && sp.Worker == name:
				sp.End = l.Time
				if l.Err != nil {
					t.Errorf("unit %s/%s (job %d, attempt %d) failed on %s: %v", l.Connection, l.VM, l.Job, l.Attempt, name, l.Err)
				}
			default:
				t.Errorf("%s: unexpected %q of unit %+v (seen: %+v)", name, l.Msg, k, sp)
			}
		}
	}
	out := make([]unitSpan, 0, len(spans))
	for k, sp := range spans {
		if sp.End.IsZero() || sp.Host == "" || len(sp.Datastores) == 0 {
			t.Errorf("unit %+v: logged without an end, a host or datastores: %+v", k, sp)
			continue
		}
		out = append(out, *sp)
	}
	return out
}

// pools are the pools a unit held (engine.SlotNeeds, and its worker's),
// named as the engine names them.
func (sp unitSpan) pools() []string {
	out := []string{"global", "worker:" + sp.Worker, "host:" + sp.Connection + "/" + sp.Host, "repo:default"}
	group := false
	for _, ds := range sp.Datastores {
		out = append(out, "datastore:"+sp.Connection+"/"+ds)
		group = group || ds == "ds-001" || ds == "ds-002"
	}
	if group {
		out = append(out, "group:ctrl-a")
	}
	return out
}

// poolPeaks is the most units any pool held at once. At equal times an
// end counts before a start: a slot is granted again only after the unit
// that held it ended on its worker and the leader saw its outcome, so
// equal readings are of the clock's resolution, not an overlap.
func poolPeaks(spans []unitSpan) map[string]int {
	type edge struct {
		at    time.Time
		delta int
		pools []string
	}
	var edges []edge
	for _, sp := range spans {
		p := sp.pools()
		edges = append(edges, edge{sp.Start, +1, p}, edge{sp.End, -1, p})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	now, peak := map[string]int{}, map[string]int{}
	for _, e := range edges {
		for _, p := range e.pools {
			now[p] += e.delta
			peak[p] = max(peak[p], now[p])
		}
	}
	return peak
}

// sortedPools are the pools' names in order, for the log.
func sortedPools(peaks map[string]int) []string { return slices.Sorted(maps.Keys(peaks)) }

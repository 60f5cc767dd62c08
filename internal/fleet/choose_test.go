package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
)

// ChooseWorker: a ready worker covering the route, the one renewed last
// among equals (no queue to count with here); for work any host may do,
// none fitting is "run here"; for a target workers reach, it is an error
// naming what no ready worker reaches, and a target no live worker
// reaches is the server's.
func TestChooseWorker(t *testing.T) {
	now := time.Now()
	w := func(name string, state catalog.WorkerState, beat time.Duration, reach catalog.WorkerReach) catalog.Worker {
		return catalog.Worker{Name: name, State: state, Slots: 2, HeartbeatAt: now.Add(-beat), Reach: reach}
	}
	kvm := func(hosts ...string) catalog.WorkerReach {
		return catalog.WorkerReach{Connections: []string{"kvm"}, Hosts: hosts}
	}
	r := Remote{Workers: registryOf{ws: []catalog.Worker{
		w("a1", catalog.WorkerReady, 2*time.Second, kvm("kvm/h1")),
		w("a2", catalog.WorkerReady, time.Second, kvm("kvm/h1")),
		w("b", catalog.WorkerDraining, 0, kvm("kvm/h2")),
		w("c", catalog.WorkerLost, 0, kvm("kvm/h3")),
		w("tape", catalog.WorkerReady, 0, catalog.WorkerReach{Libraries: []string{"lib1"}}),
		w("tape2", catalog.WorkerLost, 0, catalog.WorkerReach{Libraries: []string{"lib2"}}),
		w("boot", catalog.WorkerReady, 0, catalog.WorkerReach{CanBoot: true, Repositories: []string{"default"}}),
	}}}
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		rt       engine.Route
		optional bool
		want     string // the worker, or the error's start after "!"
	}{
		{"the host's worker renewed last", engine.Route{Connection: "kvm", Hosts: []string{"h1"}}, false, "a2"},
		{"a host whose worker drains, to a path", engine.Route{Connection: "kvm", Hosts: []string{"h2"}}, true, ""},
		{"a host whose worker drains, onto the connection", engine.Route{Connection: "kvm", Hosts: []string{"h2"}}, false,
			"!no ready worker reaches host h2: connection kvm is reached by workers (a1 (ready), a2 (ready), b (draining))"},
		{"any worker of the connection", engine.Route{Connection: "kvm"}, false, "a2"},
		{"a connection no worker reaches", engine.Route{Connection: "vc1"}, false, ""},
		{"a library's worker", engine.Route{Library: "lib1"}, false, "tape"},
		{"a library only a lost worker reached", engine.Route{Library: "lib2"}, false, ""},
		{"a library nobody reaches", engine.Route{Library: "lib3"}, false, ""},
		{"a boot of the default repository", engine.Route{Boot: true, Repository: "default"}, true, "boot"},
		{"a boot of a repository no booting worker writes", engine.Route{Boot: true, Repository: "offsite"}, true, ""},
	} {
		got, err := r.ChooseWorker(ctx, c.rt, c.optional)
		if want, isErr := strings.CutPrefix(c.want, "!"); isErr {
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s: %q, %v; want the error %q", c.name, got, err, want)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

// Only ready workers take units, with the reach they registered.
func TestEngineWorkersAreTheReadyOnes(t *testing.T) {
	reach := Reach{Connections: []string{"kvm"}, Hosts: []string{"kvm/h1"}, Repositories: []string{"main"}, CanBoot: true}
	ws := EngineWorkers([]Worker{
		{Name: "a", Slots: 2, State: catalog.WorkerReady, Reach: reach},
		{Name: "b", Slots: 2, State: catalog.WorkerStarting},
		{Name: "c", Slots: 2, State: catalog.WorkerDraining},
		{Name: "d", Slots: 2, State: catalog.WorkerLost},
	})
	if len(ws) != 1 || ws[0].Name != "a" || ws[0].Slots != 2 || !ws[0].Reach.CanBoot ||
		!ws[0].Reach.Covers(engine.Route{Connection: "kvm", Hosts: []string{"h1"}, Repository: "main"}) {
		t.Fatalf("engine workers: %+v", ws)
	}
}

// A worker's transient error, or a fenced unit, is retried by the
// engine; any other error is the attempt's failure.
func TestOutcomeErrKeepsTransience(t *testing.T) {
	for _, c := range []struct {
		out       queue.Outcome
		transient bool
	}{
		{queue.Outcome{Worker: "a", ErrorClass: "internal", Error: "snapshot busy", Transient: true}, true},
		{queue.Outcome{Worker: "a", Fenced: true, Error: "epoch 1 replaced"}, true},
		{queue.Outcome{Worker: "a", ErrorClass: "invalid", Error: "no policy p"}, false},
	} {
		err := outcomeErr(&c.out)
		if err == nil || errors.Is(err, hypervisor.ErrTransient) != c.transient {
			t.Errorf("%+v: %v, transient %v", c.out, err, errors.Is(err, hypervisor.ErrTransient))
		}
	}
	if err := outcomeErr(&queue.Outcome{Worker: "a"}); err != nil {
		t.Errorf("a success: %v", err)
	}
}

// An attempt placed on no worker, or one only this process can run
// (neither a policy's nor a backup of one VM's: a group's read), runs
// here.
func TestUnplacedAttemptsRunHere(t *testing.T) {
	r := &UnitRunner{} // no queue: handing off would panic
	for _, p := range []engine.Placement{{Policy: "p"}, {One: &engine.VMBackup{}}, {Worker: "a"}} {
		ran := false
		_, err := r.RunAttempt(context.Background(), p, func(context.Context) (*repo.Point, error) {
			ran = true
			return nil, nil
		})
		if err != nil || !ran {
			t.Errorf("%+v: ran here %v, %v", p, ran, err)
		}
	}
}

// The point the leader records from a unit's outcome is the one the
// repository holds: its manifest carried in the outcome decodes to what
// LoadPoint reads back.
func TestOutcomePointIsTheRepositorys(t *testing.T) {
	ctx := context.Background()
	r := repotest.NewLocal(t, repo.InitOptions{}).R
	w, err := r.NewWriter(ctx, "unit")
	if err != nil {
		t.Fatal(err)
	}
	pt := &repo.Point{Time: time.Now(), Host: "w1", Source: repo.Source{Kind: "fake", Connection: "east", VMID: "vm-1", VMName: "vm-1"},
		Mode: "full", SnapshotMode: "crash", VMConfig: json.RawMessage(`{"cpus": 2}`), JobID: 7, Duration: 0.25, BytesRead: 1 << 20,
		Tags: map[string]string{"tier": "gold"}, RetainUntil: time.Now().Add(time.Hour), Warnings: []string{"slow"},
		Disks: []repo.Disk{{Key: "0", Name: "sda", Kind: "disk", Size: 1 << 20, ChunkSize: 1 << 16, Map: "maps/x", Mode: "full", BytesRead: 1 << 20}}}
	if err := w.Commit(ctx, pt, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	done, err := unitDone(pt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifestPoint(done)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.LoadPoint(ctx, pt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the outcome's point\n%+v\nthe repository's\n%+v", got, want)
	}
}

package workercmd_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestWorkerOnAnotherHost: `coffer worker` on a host of its own (a
// network namespace with its own name, reaching the catalog's PostgreSQL
// over the lab's network) runs the operations handed to it by ID, with
// its own configuration (the repository it was given), and sends their
// documents back; cut off from
// the catalog, it fences itself before the dead interval ends.
func TestWorkerOnAnotherHost(t *testing.T) {
	lab := testutil.NewNetLab(t, "kvm3")
	lab.HoldNetwork() // it cuts the link
	dsn := testutil.StartPostgresOnLab(t, lab)
	e := pgEnv(t, dsn)
	e.Host = lab.Hosts()[0]
	w := startWorker(e, "kvm3")
	e.Host = nil
	cat := openCatalog(t, e)
	ready := waitWorker(t, cat, "kvm3", "worker ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })
	if ready.Host != "kvm3" {
		t.Fatalf("the worker registered from host %q, not from its namespace's kvm3", ready.Host)
	}

	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := queue.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	srv, err := queue.NewServer(pool, queue.Config{Service: operations.New(service.Config{Local: true})})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop(ctx) }()
	handed, err := srv.Submit(ctx, queue.Unit{Worker: "kvm3", Epoch: ready.Epoch, Operation: "stats", Input: &api.RepoParam{}})
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	o, err := srv.Wait(waitCtx, handed.ID)
	if err != nil || o.Err() != nil || o.Worker != "kvm3" {
		t.Fatalf("stats handed to kvm3: %+v, %v\n%s", o, err, w.Log())
	}
	var stats api.Stats
	if err := json.Unmarshal(o.Document, &stats); err != nil || stats.Objects == 0 {
		t.Fatalf("kvm3's stats of its configured repository %s: %+v, %v", e.Repo, stats, err)
	}

	// Cut off, the worker fences itself (its running work is cancelled)
	// within half the dead interval and a heartbeat; its process ends
	// later, once what still waits on the unreachable catalog gives up.
	lab.Hosts()[0].Cut()
	cut := time.Now()
	for !strings.Contains(w.Log(), "worker fenced") {
		// The property, not a speed: it must fence before the servers
		// can declare it lost and give its work to another.
		if took := time.Since(cut); took > dead {
			t.Fatalf("the cut-off worker has not fenced itself %s after the cut (dead after %s):\n%s", took, dead, w.Log())
		}
		time.Sleep(beat / 4) // a poll's pace, not a synchronisation
	}
	t.Logf("fenced %s after the cut", time.Since(cut).Round(time.Millisecond))
	if err := awaitExit(t, w); err == nil {
		t.Fatalf("a worker cut off from its catalog exited 0:\n%s", w.Log())
	}
}

package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/fleet"
)

// Short timings: a worker renews every 50 ms, fences itself after 500 ms
// without a renewal, and is lost after 1 s (400 ms lost a live worker
// once on a machine loaded twentyfold, whose SQLite commits waited that
// long).
const (
	beat = 50 * time.Millisecond
	dead = time.Second
	// wait bounds every wait for an event: generous, for a loaded machine.
	wait = 10 * time.Second
)

// openCatalog opens a real SQLite catalog; each call is another handle
// (another process) on the same file.
func openCatalog(t *testing.T) func() catalog.Catalog {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.db")
	return func() catalog.Catalog {
		c, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

func config(name string) fleet.Config {
	return fleet.Config{Name: name, Host: name + ".example", Version: "test", Slots: 2, Heartbeat: beat, DeadAfter: dead,
		Reach: fleet.Reach{Connections: []string{"kvm"}, Hosts: []string{name}}}
}

// await fails the test unless ch delivers within wait.
func await[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("%s: nothing within %s", what, wait)
		panic("unreachable")
	}
}

// run starts m.Run(work) and returns the channel of its result.
func run(m *fleet.Member, work fleet.Work) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background(), work) }()
	return done
}

func TestVersionSkewIsRefused(t *testing.T) {
	cat := openCatalog(t)()
	cfg := config("kvm1")
	cfg.Protocol = fleet.Protocol + 1
	_, err := fleet.Join(context.Background(), fleet.Registry{Catalog: cat}, cfg)
	want := fmt.Sprintf("speaks fleet protocol %d, the servers speak %d", fleet.Protocol+1, fleet.Protocol)
	if !errors.Is(err, fleet.ErrProtocol) || !strings.Contains(err.Error(), want) {
		t.Fatalf("join with protocol %d: %v", cfg.Protocol, err)
	}
	if ws, err := cat.ListWorkers(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("a refused worker left a row: %+v %v", ws, err)
	}
}

func TestNames(t *testing.T) {
	for _, name := range []string{"kvm1", "esx-proxy_2", strings.Repeat("a", fleet.MaxNameLen)} {
		if err := fleet.CheckName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"", "KVM1", "kvm--1", "-kvm", "kvm_", "kvm.example", strings.Repeat("a", fleet.MaxNameLen+1)} {
		if err := fleet.CheckName(name); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
}

// An operator's drain reaches the worker through the registry: it stops
// taking work, its running work finishes, then it deregisters.
func TestDrainLetsRunningWorkFinish(t *testing.T) {
	open := openCatalog(t)
	cat, operator := open(), open()
	m, err := fleet.Join(context.Background(), fleet.Registry{Catalog: cat}, config("kvm1"))
	if err != nil {
		t.Fatal(err)
	}
	started, sawDrain, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	done := run(m, func(ctx context.Context, drain <-chan struct{}) error {
		close(started)
		<-drain
		close(sawDrain)
		select { // the running work goes on until it is done
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	await(t, "work started", started)
	if _, err := operator.SetWorkerState(context.Background(), "kvm1", 0, catalog.WorkerDraining); err != nil {
		t.Fatal(err)
	}
	await(t, "drain seen by the work", sawDrain)
	select {
	case err := <-done:
		t.Fatalf("the worker stopped before its work finished: %v", err)
	default:
	}
	close(release)
	if err := await(t, "worker stopped", done); err != nil {
		t.Fatal(err)
	}
	if ws, err := operator.ListWorkers(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("a drained worker is still registered: %+v %v", ws, err)
	}
}

// A worker declared lost by a server (or taken over by another process)
// is refused its next renewal and cancels its running work at once.
func TestLostWorkerIsFenced(t *testing.T) {
	open := openCatalog(t)
	cat, server := open(), open()
	m, err := fleet.Join(context.Background(), fleet.Registry{Catalog: cat}, config("kvm1"))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := run(m, func(ctx context.Context, _ <-chan struct{}) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	await(t, "work started", started)
	lost, err := server.DeclareWorkersLost(context.Background(), time.Now().Add(time.Hour))
	if err != nil || len(lost) != 1 {
		t.Fatalf("declare lost: %+v %v", lost, err)
	}
	err = await(t, "worker fenced", done)
	if !errors.Is(err, catalog.ErrFenced) || !strings.Contains(err.Error(), "declared lost") {
		t.Fatalf("run of a lost worker: %v", err)
	}
}

// failingRenewals is the catalog cut off from the worker: once cut, its
// renewals hang until their deadline, as over a partitioned network.
type failingRenewals struct {
	fleet.Registrar
	cut atomic.Bool
}

func (f *failingRenewals) Heartbeat(ctx context.Context, name string, epoch int64, now time.Time) (fleet.Worker, error) {
	if f.cut.Load() {
		<-ctx.Done()
		return fleet.Worker{}, ctx.Err()
	}
	return f.Registrar.Heartbeat(ctx, name, epoch, now)
}

// A worker that cannot renew fences itself after half the dead interval:
// before any server can declare it lost and give its work to another.
func TestWorkerThatCannotRenewFencesItself(t *testing.T) {
	cat := openCatalog(t)()
	reg := &failingRenewals{Registrar: fleet.Registry{Catalog: cat}}
	m, err := fleet.Join(context.Background(), reg, config("kvm1"))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var cancelled atomic.Int64
	done := run(m, func(ctx context.Context, _ <-chan struct{}) error {
		close(started)
		<-ctx.Done()
		cancelled.Store(time.Now().UnixNano())
		return ctx.Err()
	})
	await(t, "work started", started)
	reg.cut.Store(true)
	err = await(t, "worker fenced", done)
	if !errors.Is(err, catalog.ErrFenced) || !strings.Contains(err.Error(), "fenced itself") {
		t.Fatalf("run of a cut-off worker: %v", err)
	}
	ws, err := cat.ListWorkers(context.Background())
	if err != nil || len(ws) != 1 {
		t.Fatal(ws, err)
	}
	if since := time.Unix(0, cancelled.Load()).Sub(ws[0].HeartbeatAt); since < dead/2 || since >= dead {
		t.Fatalf("the work was cancelled %s after the last renewal, want within [%s, %s)", since, dead/2, dead)
	}
}

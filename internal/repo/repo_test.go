package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

var fastKDF = &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("0123456789abcdef")}

func newTestRepo(t *testing.T, o Options) (*Repository, store.Store) {
	t.Helper()
	st, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Init(ctx, st, InitOptions{Password: []byte("pw"), KDF: fastKDF}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, st, []byte("pw"), o)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

func TestMaintenanceLeaseExcludesAndExpires(t *testing.T) {
	r, st := newTestRepo(t, Options{LeaseTTL: time.Hour})
	ctx := context.Background()
	l1, err := r.AcquireLease(ctx, "gc", "", "first", true)
	if err != nil {
		t.Fatal(err)
	}
	// Another process (a second handle; same host, live PID) is excluded
	// and told who holds the lease.
	r2, _ := Open(ctx, st, []byte("pw"), Options{LeaseTTL: time.Hour})
	_, err = r2.AcquireLease(ctx, "gc", "", "second", true)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.Holder.Kind != "gc" || le.Holder.PID != os.Getpid() {
		t.Fatalf("second maintenance lease: %v", err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := r2.AcquireLease(ctx, "gc", "", "second", true)
	if err != nil {
		t.Fatalf("lease not free after release: %v", err)
	}
	_ = l2.Release(ctx)
}

func TestLeaseOfDeadProcessIsTakenOver(t *testing.T) {
	r, _ := newTestRepo(t, Options{LeaseTTL: time.Hour})
	ctx := context.Background()
	// A lease written by a process that has exited (same host).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	info := r.newLeaseInfo("gc", "", "dead holder")
	info.PID = cmd.Process.Pid
	info.Name = maintenanceName
	if _, err := store.Put(ctx, r.st, maintenanceName, r.encodeLease(info), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := r.AcquireLease(ctx, "gc", "", "new holder", true)
	if err != nil {
		t.Fatalf("dead holder blocked the lease: %v", err)
	}
	_ = l.Release(ctx)
	// An expired lease from another host is dead too.
	info.Host, info.PID, info.Expires = "elsewhere", 1, time.Now().Add(-time.Minute)
	if !info.Dead(time.Now(), r.hostname) {
		t.Fatal("expired lease considered alive")
	}
	info.Expires = time.Now().Add(time.Minute)
	if info.Dead(time.Now(), r.hostname) {
		t.Fatal("live lease of another host considered dead")
	}
}

func TestLostLeaseIsNoticed(t *testing.T) {
	r, st := newTestRepo(t, Options{LeaseTTL: 400 * time.Millisecond})
	ctx := context.Background()
	l, err := r.AcquireLease(ctx, "backup", "s", "test", false)
	if err != nil {
		t.Fatal(err)
	}
	// Someone removes the lease (a recovery that judged it dead): the next
	// refresh's IfMatch fails and the session learns it lost the lease.
	if err := st.Delete(ctx, l.Info().Name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("lost lease not noticed")
	}
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Fatalf("Err = %v", l.Err())
	}
}

func TestConfigTamperingIsDetected(t *testing.T) {
	_, st := newTestRepo(t, Options{})
	ctx := context.Background()
	raw, _ := store.Get(ctx, st, "config", 0, -1)
	var c map[string]any
	_ = json.Unmarshal(raw, &c)
	c["encryption"] = "none" // a downgrade attempt
	bad, _ := json.Marshal(c)
	_, _ = store.Put(ctx, st, "config", bad, store.PutOptions{})
	if _, err := Open(ctx, st, []byte("pw"), Options{}); err == nil || !strings.Contains(err.Error(), "tampered") {
		t.Fatalf("downgraded config opened: %v", err)
	}
	// A damaged or deleted config is rebuilt from the authenticated copy
	// every key file carries, reported, and written again by RepairConfig.
	for _, damage := range []func(){
		func() { _, _ = store.Put(ctx, st, "config", []byte("{not json"), store.PutOptions{}) },
		func() { _ = st.Delete(ctx, "config") },
	} {
		damage()
		r, err := Open(ctx, st, []byte("pw"), Options{})
		if err != nil || len(r.Health()) != 1 || r.Health()[0].Kind != "config" {
			t.Fatalf("damaged config: %v %+v", err, r)
		}
		if _, err := r.RepairConfig(ctx, false); err != nil {
			t.Fatal(err)
		}
		if r, err = Open(ctx, st, []byte("pw"), Options{}); err != nil || len(r.Health()) != 0 {
			t.Fatalf("after repair: %v %+v", err, r.Health())
		}
	}
}

func TestInitRefusesExistingAndBadParameters(t *testing.T) {
	_, st := newTestRepo(t, Options{})
	ctx := context.Background()
	if _, err := Init(ctx, st, InitOptions{Password: []byte("x"), KDF: fastKDF}); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second init: %v", err)
	}
	st2, _ := local.Create(t.TempDir())
	for _, o := range []InitOptions{
		{Password: []byte("x"), ChunkSize: 3 << 20},
		{Password: []byte("x"), ChunkSize: 1 << 10},
		{Password: []byte("x"), CompressionLevel: 40},
		{},
	} {
		o.KDF = fastKDF
		if _, err := Init(ctx, st2, o); err == nil {
			t.Errorf("init accepted %+v", o)
		}
	}
}

func TestSnapshotRoundTripAndDamage(t *testing.T) {
	r, st := newTestRepo(t, Options{})
	ctx := context.Background()
	s := &Point{ID: id.Random(), Time: time.Now().UTC().Truncate(time.Second), Source: Source{Kind: "disk", VMName: "v"},
		Mode: "full", Disks: []Disk{{Key: "0", Name: "d", Size: 10, ChunkSize: 1 << 20, Map: "maps/x"}}}
	if err := r.saveSnapshot(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := r.FindPoint(ctx, s.ID.Short())
	if err != nil || !got.Time.Equal(s.Time) || got.Disks[0].Map != "maps/x" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	raw, _ := store.Get(ctx, st, snapshotName(s.ID), 0, -1)
	raw[len(raw)-5] ^= 1
	_, _ = store.Put(ctx, st, snapshotName(s.ID), raw, store.PutOptions{})
	var bad []id.ID
	list, err := r.Points(ctx, func(x id.ID, err error) { bad = append(bad, x) })
	if err != nil || len(list) != 0 || len(bad) != 1 {
		t.Fatalf("damaged manifest: list %d bad %d err %v", len(list), len(bad), err)
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	r := &Repository{key: crypto.Null()}
	s := &Point{Source: Source{Kind: "disk", VMName: "v"}, Disks: []Disk{{Key: "0"}}}
	b, _ := r.encodeSnapshot(s)
	f.Add(b)
	f.Add(bytes.Repeat([]byte{0}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = r.decodeSnapshot(id.ID{}, data)
	})
}

// closeCounter counts the closes of the store it wraps.
type closeCounter struct {
	store.Store
	closes int
}

func (c *closeCounter) Close() error {
	c.closes++
	return c.Store.Close()
}

func TestCloseClosesTheStoreOnce(t *testing.T) {
	_, st := newTestRepo(t, Options{})
	counted := &closeCounter{Store: st}
	r, err := Open(context.Background(), counted, []byte("pw"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if counted.closes != 1 {
		t.Fatalf("the store was closed %d times, want 1", counted.closes)
	}
}

// TestCancelledCommitLeavesNoPoint: a backup whose context ends before
// its point is committed (a job cancelled, a worker fenced) leaves no
// point, even on a local disk, whose writes do not heed the context.
func TestCancelledCommitLeavesNoPoint(t *testing.T) {
	r, _ := newTestRepo(t, Options{})
	w, err := r.NewWriter(context.Background(), "cancelled commit")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close(context.Background()) }()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the worker fenced itself"))
	s := &Point{Time: time.Now().UTC(), Source: Source{Kind: "disk", VMName: "v"}, Mode: "full"}
	if err := w.Commit(ctx, s, nil); err == nil || !strings.Contains(err.Error(), "fenced itself") {
		t.Fatalf("a commit under a cancelled context: %v", err)
	}
	if list, err := r.Points(context.Background(), nil); err != nil || len(list) != 0 {
		t.Fatalf("points after a cancelled commit: %d (%v)", len(list), err)
	}
}

package leader

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/version"
)

// handClock gives an elector a timer the test fires by hand.
type handClock struct {
	waits chan time.Duration
	fire  chan time.Time
}

func newHandClock() *handClock {
	return &handClock{waits: make(chan time.Duration), fire: make(chan time.Time)}
}

func (c *handClock) After(d time.Duration) <-chan time.Time {
	c.waits <- d
	return c.fire
}

// TestStoppedLeaderHandsOver: of two electors on one catalog, the first
// leads; the second waits; when the first stops it releases the lease, and
// the second leads at its next campaign. A lease whose holder died (it
// expired) is taken at once.
func TestStoppedLeaderHandsOver(t *testing.T) {
	ctx := context.Background()
	cat, err := catalogopen.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	led := make(chan string, 4)
	lead := func(name string) func(context.Context) {
		return func(ctx context.Context) {
			led <- name
			<-ctx.Done()
		}
	}
	ca, cb := newHandClock(), newHandClock()
	a := &Elector{Leases: cat, Holder: "a", TTL: 30 * time.Second, After: ca.After}
	b := &Elector{Leases: cat, Holder: "b", TTL: 30 * time.Second, After: cb.After}
	actx, stopA := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(actx, lead("a")) }()
	if got := <-led; got != "a" {
		t.Fatalf("%s leads first", got)
	}
	if d := <-ca.waits; d != 10*time.Second {
		t.Fatalf("a renews after %s, want a third of the TTL", d)
	}
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	bDone := make(chan error, 1)
	go func() { bDone <- b.Run(bctx, lead("b")) }()
	<-cb.waits // b campaigned and waits: a holds the lease
	select {
	case got := <-led:
		t.Fatalf("%s leads beside a", got)
	default:
	}
	stopA() // a waits on its timer: it sees its end at once, and releases
	if err := <-aDone; err == nil {
		t.Fatal("a's Run ended without an error")
	}
	cb.fire <- time.Now()
	if got := <-led; got != "b" {
		t.Fatalf("%s leads after a stopped", got)
	}
	stopB()
	<-cb.waits
	<-bDone

	// A holder that died: its lease expired, the next elector takes it.
	if _, held, err := cat.AcquireLease(ctx, Schedules, "dead", time.Now().Add(-time.Hour), 30*time.Second); err != nil || !held {
		t.Fatalf("set up a dead holder's lease: %v %v", held, err)
	}
	cc := newHandClock()
	c := &Elector{Leases: cat, Holder: "c", TTL: 30 * time.Second, After: cc.After}
	cctx, stopC := context.WithCancel(ctx)
	cDone := make(chan error, 1)
	go func() { cDone <- c.Run(cctx, lead("c")) }()
	if got := <-led; got != "c" {
		t.Fatalf("%s took the dead holder's lease", got)
	}
	stopC()
	<-cc.waits
	<-cDone
}

// TestHolderNamesItsVersion: `coffer upgrade check` reads the version of
// a lease's holder from its name; one of v0.1.0 names none.
func TestHolderNamesItsVersion(t *testing.T) {
	if got, want := HolderVersion(Holder()), version.Get().Version; got != want || want == "" {
		t.Errorf("Holder() %q names version %q, want %q", Holder(), got, want)
	}
	if got := HolderVersion("host/12/34"); got != "" {
		t.Errorf("a v0.1.0 holder names version %q, want none", got)
	}
}

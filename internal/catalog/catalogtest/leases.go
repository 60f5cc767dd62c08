package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// testLeases: a lease goes to the first taker, is renewed by its holder,
// refused to others until it expires, then taken over with the next
// epoch; a release frees it at once.
func testLeases(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	acquire := func(holder string, now time.Time) (catalog.Lease, bool) {
		t.Helper()
		l, held, err := c.AcquireLease(ctx, "schedules", holder, now, 30*time.Second)
		ok(t, err)
		return l, held
	}
	l, held := acquire("a", at(0))
	if !held || l.Holder != "a" || l.Epoch != 1 || !l.ExpiresAt.Equal(at(30*time.Second)) || !l.AcquiredAt.Equal(at(0)) {
		t.Fatalf("first acquire: %+v held=%v", l, held)
	}
	if l, held = acquire("b", at(10*time.Second)); held || l.Holder != "a" {
		t.Fatalf("b took a live lease of a: %+v", l)
	}
	if l, held = acquire("a", at(20*time.Second)); !held || l.Epoch != 1 || !l.ExpiresAt.Equal(at(50*time.Second)) || !l.AcquiredAt.Equal(at(0)) {
		t.Fatalf("renewal: %+v held=%v", l, held)
	}
	if l, held = acquire("b", at(50*time.Second)); !held || l.Holder != "b" || l.Epoch != 2 || !l.AcquiredAt.Equal(at(50*time.Second)) {
		t.Fatalf("takeover of an expired lease: %+v held=%v", l, held)
	}
	if _, held = acquire("a", at(51*time.Second)); held {
		t.Fatal("the old holder renewed a lease taken over")
	}
	ok(t, c.ReleaseLease(ctx, "schedules", "a")) // not a's: nothing happens
	if _, held = acquire("a", at(52*time.Second)); held {
		t.Fatal("a release by another holder freed the lease")
	}
	ok(t, c.ReleaseLease(ctx, "schedules", "b"))
	if l, err := c.GetLease(ctx, "schedules"); err != nil || l.Holder != "" || l.Epoch != 2 {
		t.Fatalf("a released lease reads %+v, %v: want no holder and its epoch kept", l, err)
	}
	// The epoch goes on from the released one's: a grant made under an
	// earlier holding never passes for one of this holding.
	if l, held = acquire("a", at(53*time.Second)); !held || l.Epoch != 3 {
		t.Fatalf("acquire after release: %+v held=%v", l, held)
	}
	if l, err := c.GetLease(ctx, "schedules"); err != nil || l.Holder != "a" || l.Epoch != 3 || !l.ExpiresAt.Equal(at(83*time.Second)) {
		t.Fatalf("read the lease: %+v, %v", l, err)
	}
	if _, err := c.GetLease(ctx, "never-taken"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("read a lease never taken: %v, want ErrNotFound", err)
	}
	if _, _, err := c.AcquireLease(ctx, "", "a", at(0), time.Second); err == nil {
		t.Fatal("a lease without a name was accepted")
	}
}

// testConcurrentLeases: processes racing for a free or expired lease,
// again and again: each time exactly one holds it.
func testConcurrentLeases(t *testing.T, open Opener) {
	const handles, rounds = 4, 20
	ctx := context.Background()
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	for round := range rounds {
		now := at(time.Duration(round) * time.Minute) // the previous round's lease has expired
		var mu sync.Mutex
		var holders []string
		g, gctx := errgroup.WithContext(ctx)
		for h := range handles {
			g.Go(func() error {
				who := fmt.Sprintf("p%d", h)
				_, held, err := cats[h].AcquireLease(gctx, "schedules", who, now, 30*time.Second)
				if held {
					mu.Lock()
					holders = append(holders, who)
					mu.Unlock()
				}
				return err
			})
		}
		ok(t, g.Wait())
		if len(holders) != 1 {
			t.Fatalf("round %d: holders %v, want exactly one", round, holders)
		}
	}
}

// testClaimRuns: each (schedule, slot) is claimed once, whoever asks and
// however many ask at once; other slots and schedules are separate.
func testClaimRuns(t *testing.T, open Opener) {
	const handles, slots = 3, 30
	ctx := context.Background()
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	var mu sync.Mutex
	won := map[string]int{}
	g, gctx := errgroup.WithContext(ctx)
	for h := range handles {
		g.Go(func() error {
			for i := range slots {
				for _, sched := range []string{"policy/nightly", "maintenance/main/gc"} {
					got, err := cats[h].ClaimRun(gctx, sched, at(time.Duration(i)*time.Hour), fmt.Sprintf("p%d", h), at(0))
					if err != nil {
						return err
					}
					if got {
						mu.Lock()
						won[fmt.Sprintf("%s@%d", sched, i)]++
						mu.Unlock()
					}
				}
			}
			return nil
		})
	}
	ok(t, g.Wait())
	if len(won) != 2*slots {
		t.Fatalf("%d runs claimed, want %d", len(won), 2*slots)
	}
	for k, n := range won {
		if n != 1 {
			t.Fatalf("run %s claimed %d times", k, n)
		}
	}
	// A week later, a claim forgets the old ones; a slot is never claimed
	// twice within the week.
	got, err := cats[0].ClaimRun(ctx, "policy/nightly", at(0), "p9", at(time.Hour))
	ok(t, err)
	if got {
		t.Fatal("a claimed run was claimed again")
	}
	testLastRun(t, cats[0], at(time.Duration(slots-1)*time.Hour))
}

// testLastRun: the newest claimed slot of a schedule is known, and stays
// known after a week, when a later claim forgets the older ones.
func testLastRun(t *testing.T, cat catalog.Catalog, newest time.Time) {
	ctx := context.Background()
	last, found, err := cat.LastRun(ctx, "maintenance/main/gc")
	ok(t, err)
	if !found || !last.Equal(newest) {
		t.Fatalf("last run %s (%v), want %s", last, found, newest)
	}
	if _, found, err := cat.LastRun(ctx, "maintenance/never"); err != nil || found {
		t.Fatalf("a schedule never claimed has a last run (%v)", err)
	}
	later := newest.Add(30 * 24 * time.Hour)
	got, err := cat.ClaimRun(ctx, "policy/other", later, "p9", later)
	ok(t, err)
	if !got {
		t.Fatal("a new claim was refused")
	}
	last, found, err = cat.LastRun(ctx, "maintenance/main/gc")
	ok(t, err)
	if !found || !last.Equal(newest) {
		t.Fatalf("after a month, the last run is %s (%v), want %s kept", last, found, newest)
	}
	// The older claims were forgotten: an old slot may be claimed again.
	got, err = cat.ClaimRun(ctx, "maintenance/main/gc", newest.Add(-time.Hour), "p9", later)
	ok(t, err)
	if !got {
		t.Fatal("a claim older than a week was not forgotten")
	}
}

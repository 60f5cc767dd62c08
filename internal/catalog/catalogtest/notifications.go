package catalogtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func notificationEvent(title string) *catalog.NotificationEvent {
	return &catalog.NotificationEvent{Time: at(time.Minute), Type: "task-failed", Severity: "error",
		Object: "/policies/nightly", Title: title, Data: []byte(`{"title": "` + title + `", "labels": {"vm": "web"}}`)}
}

// sameJSON compares JSON documents by value: PostgreSQL's JSONB does not
// keep the spacing or the order of keys.
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v (%q)", what, err, got)
	}
	ok(t, json.Unmarshal(want, &w))
	same(t, what, g, w)
}

func testNotifications(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	ev := notificationEvent("backup of web failed")
	ds, err := c.AddNotification(ctx, ev, []string{"mail", "hook"})
	ok(t, err)
	if ev.ID == 0 || len(ds) != 2 || ds[0].Target != "mail" || ds[1].Target != "hook" || ds[0].EventID != ev.ID {
		t.Fatalf("AddNotification: event %d, deliveries %+v", ev.ID, ds)
	}
	for _, d := range ds {
		if d.Status != catalog.DeliveryPending || d.Attempts != 0 || d.CreatedAt.IsZero() || d.NextAttemptAt.IsZero() {
			t.Fatalf("new delivery %+v", d)
		}
	}
	got, err := c.GetDelivery(ctx, ds[0].ID)
	ok(t, err)
	sameJSON(t, "event data", got.Event.Data, ev.Data)
	got.Event.Data, ds[0].Event.Data = nil, nil
	same(t, "delivery read back", got, ds[0])

	// Claimed deliveries are not handed out again until the lease ends.
	now := time.Now().Add(time.Second)
	claimed, err := c.ClaimDeliveries(ctx, now, time.Minute, 10)
	ok(t, err)
	same(t, "claimed", ids(claimed, deliveryID), []int64{ds[0].ID, ds[1].ID})
	if claimed[0].Event.Title != ev.Title || claimed[0].Event.Time != ev.Time {
		t.Fatalf("claimed delivery carries event %+v, want %+v", claimed[0].Event, ev)
	}
	again, err := c.ClaimDeliveries(ctx, now.Add(59*time.Second), time.Minute, 10)
	ok(t, err)
	same(t, "claimed within the lease", len(again), 0)
	due, err := c.NextDeliveryDue(ctx)
	ok(t, err)
	same(t, "next due while leased", due, normalized(now.Add(time.Minute)))

	// A failed attempt is due again at its next time; a delivered one is done.
	ok(t, c.RecordDeliveryAttempt(ctx, catalog.DeliveryAttempt{ID: ds[0].ID, At: now, Status: catalog.DeliveryPending,
		Error: "connection refused", Next: now.Add(10 * time.Second)}))
	ok(t, c.RecordDeliveryAttempt(ctx, catalog.DeliveryAttempt{ID: ds[1].ID, At: now, Status: catalog.DeliveryDelivered}))
	d0, err := c.GetDelivery(ctx, ds[0].ID)
	ok(t, err)
	if d0.Status != catalog.DeliveryPending || d0.Attempts != 1 || d0.LastError != "connection refused" ||
		d0.LastAttemptAt != normalized(now) || d0.NextAttemptAt != normalized(now.Add(10*time.Second)) {
		t.Fatalf("after a failed attempt: %+v", d0)
	}
	d1, err := c.GetDelivery(ctx, ds[1].ID)
	ok(t, err)
	if d1.Status != catalog.DeliveryDelivered || d1.Attempts != 1 || d1.DeliveredAt != normalized(now) {
		t.Fatalf("after delivery: %+v", d1)
	}
	claimed, err = c.ClaimDeliveries(ctx, now.Add(10*time.Second), time.Minute, 10)
	ok(t, err)
	same(t, "claimed after the retry time", ids(claimed, deliveryID), []int64{ds[0].ID})

	// Giving up, retrying by hand, and what cannot be retried.
	ok(t, c.RecordDeliveryAttempt(ctx, catalog.DeliveryAttempt{ID: ds[0].ID, At: now, Status: catalog.DeliveryFailed,
		Error: "gave up"}))
	due, err = c.NextDeliveryDue(ctx)
	ok(t, err)
	same(t, "next due with nothing pending", due, time.Time{})
	if err := c.RetryDelivery(ctx, ds[1].ID, now); !errors.Is(err, catalog.ErrNotFailed) {
		t.Fatalf("retry of a delivered delivery: %v, want ErrNotFailed", err)
	}
	wantNotFound(t, "retry of a missing delivery", c.RetryDelivery(ctx, 1<<40, now))
	wantNotFound(t, "attempt of a missing delivery", c.RecordDeliveryAttempt(ctx,
		catalog.DeliveryAttempt{ID: 1 << 40, Status: catalog.DeliveryDelivered}))
	_, err = c.GetDelivery(ctx, 1<<40)
	wantNotFound(t, "get of a missing delivery", err)
	ok(t, c.RetryDelivery(ctx, ds[0].ID, now.Add(time.Hour)))
	claimed, err = c.ClaimDeliveries(ctx, now.Add(time.Hour), time.Minute, 10)
	ok(t, err)
	same(t, "claimed after a retry", ids(claimed, deliveryID), []int64{ds[0].ID})
	// A finished delivery keeps its outcome when a late attempt reports.
	ok(t, c.RecordDeliveryAttempt(ctx, catalog.DeliveryAttempt{ID: ds[1].ID, At: now, Status: catalog.DeliveryFailed,
		Error: "late"}))
	d1, err = c.GetDelivery(ctx, ds[1].ID)
	ok(t, err)
	if d1.Status != catalog.DeliveryDelivered || d1.Attempts != 1 || d1.LastError != "" {
		t.Fatalf("a late attempt changed a delivered delivery: %+v", d1)
	}
	if _, err := c.AddNotification(ctx, notificationEvent("x"), nil); err == nil {
		t.Fatal("an event without a target was recorded")
	}
}

func deliveryID(d catalog.Delivery) int64 { return d.ID }

func normalized(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func testDeliveryFilters(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	var all []catalog.Delivery
	for i := range 3 {
		ds, err := c.AddNotification(ctx, notificationEvent(fmt.Sprint("event ", i)), []string{"a", "b"})
		ok(t, err)
		all = append(all, ds...)
	}
	ok(t, c.RecordDeliveryAttempt(ctx, catalog.DeliveryAttempt{ID: all[2].ID, Status: catalog.DeliveryFailed, Error: "no"}))
	list := func(f catalog.DeliveryFilter) []int64 {
		ds, err := c.ListDeliveries(ctx, f)
		ok(t, err)
		return ids(ds, deliveryID)
	}
	same(t, "all, newest first", list(catalog.DeliveryFilter{}),
		[]int64{all[5].ID, all[4].ID, all[3].ID, all[2].ID, all[1].ID, all[0].ID})
	same(t, "target b", list(catalog.DeliveryFilter{Target: "b"}), []int64{all[5].ID, all[3].ID, all[1].ID})
	same(t, "failed", list(catalog.DeliveryFilter{Status: catalog.DeliveryFailed}), []int64{all[2].ID})
	same(t, "event", list(catalog.DeliveryFilter{EventID: all[0].EventID}), []int64{all[1].ID, all[0].ID})
	same(t, "limit", list(catalog.DeliveryFilter{Limit: 2}), []int64{all[5].ID, all[4].ID})
	same(t, "since the future", len(list(catalog.DeliveryFilter{Since: time.Now().Add(time.Hour)})), 0)

	// Pruning keeps events with a pending delivery, whatever their age.
	for _, d := range all[:2] {
		ok(t, c.RecordDeliveryAttempt(ctx, catalog.DeliveryAttempt{ID: d.ID, Status: catalog.DeliveryDelivered}))
	}
	n, err := c.PruneNotifications(ctx, at(time.Minute))
	ok(t, err)
	same(t, "pruned before the events", n, 0)
	n, err = c.PruneNotifications(ctx, at(time.Hour))
	ok(t, err)
	same(t, "pruned events", n, 1)
	same(t, "left after pruning", list(catalog.DeliveryFilter{}),
		[]int64{all[5].ID, all[4].ID, all[3].ID, all[2].ID})
}

// testConcurrentClaims: handles of several "processes" claim the same due
// deliveries at once; each delivery goes to exactly one of them.
func testConcurrentClaims(t *testing.T, open Opener) {
	const handles, goroutines, events = 3, 2, 40
	ctx := context.Background()
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	want := map[int64]bool{}
	for i := range events {
		ds, err := cats[0].AddNotification(ctx, notificationEvent(fmt.Sprint(i)), []string{"t"})
		ok(t, err)
		want[ds[0].ID] = true
	}
	now := time.Now().Add(time.Second)
	var mu sync.Mutex
	got := map[int64]int{}
	g, gctx := errgroup.WithContext(ctx)
	for h := range handles {
		for range goroutines {
			g.Go(func() error {
				for {
					ds, err := cats[h].ClaimDeliveries(gctx, now, time.Hour, 3)
					if err != nil || len(ds) == 0 {
						return err
					}
					mu.Lock()
					for _, d := range ds {
						got[d.ID]++
					}
					mu.Unlock()
				}
			})
		}
	}
	ok(t, g.Wait())
	if len(got) != len(want) {
		t.Fatalf("%d of %d deliveries claimed", len(got), len(want))
	}
	for id, n := range got {
		if n != 1 || !want[id] {
			t.Fatalf("delivery %d claimed %d times (known: %v)", id, n, want[id])
		}
	}
}

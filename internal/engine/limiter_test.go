package engine

import (
	"context"
	"errors"
	"testing"
)

// TestLimiterSharesThePools: work outside a job takes slots of the same
// pools as the engine's jobs: a library's pool bounds it, the global
// pool too, a waiter whose context ends holds nothing and leaves the
// queue, and a release is given back once however often it is called.
func TestLimiterSharesThePools(t *testing.T) {
	ctx := context.Background()
	l := NewLimiter(3)
	drive := SlotNeed{Key: "library:robot", Cap: 2}
	a, err := l.Acquire(ctx, 10, nil, drive)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, 10, nil, drive)
	if err != nil {
		t.Fatal(err)
	}
	third := make(chan func(), 1)
	go func() {
		r, err := l.Acquire(ctx, 10, nil, drive)
		if err != nil {
			t.Error(err)
		}
		third <- r
	}()
	// A waiter whose context is cancelled while the pool is full is told
	// it waits, then holds nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	waited := false
	if r, err := l.Acquire(cctx, 10, func() { waited = true }, drive); !errors.Is(err, context.Canceled) || r != nil || !waited {
		t.Fatalf("a cancelled wait: %v (told it waits: %v)", err, waited)
	}
	if got := inUse(l, "library:robot"); got != 2 {
		t.Fatalf("library pool: %d in use, want 2 (the third waits)", got)
	}
	// Unlimited pools are not taken; the global one is (3 slots: a, b
	// and this one).
	c, err := l.Acquire(ctx, 1, func() { t.Error("told to wait for free slots") }, SlotNeed{Key: "library:other", Cap: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := inUse(l, GlobalPool); got != 3 {
		t.Fatalf("global pool: %d in use, want 3", got)
	}
	a()
	a() // once only
	c()
	r := <-third
	if got := inUse(l, "library:robot"); got != 2 {
		t.Fatalf("after a release the third holds a slot: %d in use, want 2", got)
	}
	b()
	r()
	for _, s := range l.Slots() {
		if s.InUse != 0 {
			t.Fatalf("pool %s: %d in use after every release", s.Key, s.InUse)
		}
	}
}

func inUse(l *Limiter, key string) int {
	for _, s := range l.Slots() {
		if s.Key == key {
			return s.InUse
		}
	}
	return -1
}

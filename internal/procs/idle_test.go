package procs

import (
	"context"
	"runtime"
	"testing"
	"time"
)

func TestTheGovernorShrinksOnlyAfterAQuietWindow(t *testing.T) {
	o := Options{Tick: 100 * time.Millisecond, Quiet: time.Second}.withDefaults()
	g := newGovernor(o)
	for i := 0; i < 9; i++ {
		if c := g.observe(time.Millisecond); c != keep {
			t.Fatalf("tick %d of a quiet window of 10: %v, want keep", i+1, c)
		}
	}
	if c := g.observe(time.Millisecond); c != shrink {
		t.Fatalf("after 10 quiet ticks: %v, want shrink", c)
	}
}

func TestTheGovernorKeepsEveryProcessorWhileTheWindowIsBusy(t *testing.T) {
	o := Options{Tick: 100 * time.Millisecond, Quiet: time.Second}.withDefaults()
	g := newGovernor(o)
	// 0.25 of a core over the window (one busy tick), over the 0.2 share.
	if c := g.observe(250 * time.Millisecond); c != keep {
		t.Fatalf("busy tick: %v", c)
	}
	for i := 0; i < 9; i++ {
		if c := g.observe(0); c != keep {
			t.Fatalf("tick %d after a busy one: %v, want keep", i+2, c)
		}
	}
	// The busy tick leaves the window: now it is quiet.
	if c := g.observe(0); c != shrink {
		t.Fatalf("once the busy tick left the window: %v, want shrink", c)
	}
}

func TestTheGovernorGrowsOnTheFirstBusyTick(t *testing.T) {
	o := Options{Tick: 100 * time.Millisecond, Quiet: 200 * time.Millisecond}.withDefaults()
	g := newGovernor(o)
	g.observe(0)
	if c := g.observe(0); c != shrink {
		t.Fatalf("quiet: %v, want shrink", c)
	}
	if c := g.observe(40 * time.Millisecond); c != keep {
		t.Fatalf("0.4 of a core on one processor: %v, want keep", c)
	}
	if c := g.observe(60 * time.Millisecond); c != grow {
		t.Fatalf("0.6 of a core on one processor: %v, want grow", c)
	}
	// Grown, it waits a whole quiet window again before shrinking.
	if c := g.observe(0); c != keep {
		t.Fatalf("first tick after growing: %v, want keep", c)
	}
}

// TestTheProcessGoesToOneProcessorAndBack runs the governor on this test
// process: idle, it gets one processor; busy, all of them again.
func TestTheProcessGoesToOneProcessorAndBack(t *testing.T) {
	full := runtime.GOMAXPROCS(0)
	if full < 2 {
		t.Skip("one processor: nothing to govern")
	}
	stop := start(Options{Tick: 10 * time.Millisecond, Quiet: 100 * time.Millisecond, BusyShare: 0.05}.withDefaults(), processCPU)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	waitFor(t, "one processor while idle", func() bool { return runtime.GOMAXPROCS(0) == 1 })
	if got := Working(); got != full {
		t.Fatalf("Procs %d while idle, want the %d work gets", got, full)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < full; i++ {
		go burn(ctx)
	}
	waitFor(t, "every processor while busy", func() bool { return runtime.GOMAXPROCS(0) == full })
	cancel()
	waitFor(t, "one processor once idle again", func() bool { return runtime.GOMAXPROCS(0) == 1 })
	stop()
	stopped = true
	if got := runtime.GOMAXPROCS(0); got != full {
		t.Fatalf("after stop: GOMAXPROCS %d, want %d", got, full)
	}
}

func burn(ctx context.Context) {
	x := 0
	for ctx.Err() == nil {
		for i := 0; i < 1_000_000; i++ {
			x += i
		}
	}
	_ = x
}

// waitFor polls cond, which the governor's own ticks make true, for up to
// 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s (GOMAXPROCS %d)", what, runtime.GOMAXPROCS(0))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAnOperatorsGOMAXPROCSStands(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: nothing to govern")
	}
	t.Setenv("GOMAXPROCS", "")
	if !governable() {
		t.Fatal("not governed without GOMAXPROCS in the environment")
	}
	t.Setenv("GOMAXPROCS", "2")
	if governable() {
		t.Fatal("governed although GOMAXPROCS is set in the environment")
	}
}

// TestServersInOneProcessShareTheGovernor starts two governed servers'
// worth in this process: the first one's stop leaves the governor to the
// second, whose stop gives every processor back.
func TestServersInOneProcessShareTheGovernor(t *testing.T) {
	full := runtime.GOMAXPROCS(0)
	if full < 2 {
		t.Skip("one processor: nothing to govern")
	}
	t.Setenv("GOMAXPROCS", "")
	quick := Options{Tick: 10 * time.Millisecond, Quiet: 100 * time.Millisecond}
	first := ShrinkWhenIdle(quick)
	second := ShrinkWhenIdle(quick)
	first()
	first() // a second call changes nothing
	waitFor(t, "one processor while idle, after the first stop", func() bool { return runtime.GOMAXPROCS(0) == 1 })
	second()
	if got := runtime.GOMAXPROCS(0); got != full {
		t.Fatalf("after the last stop: GOMAXPROCS %d, want %d", got, full)
	}
	if got := Working(); got != full {
		t.Fatalf("Procs %d after the last stop, want %d", got, full)
	}
}

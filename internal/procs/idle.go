package procs

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options tune ShrinkWhenIdle; the zero value takes the defaults.
type Options struct {
	// Tick is how often the process's CPU is read (default 200 ms): the
	// longest the process works on one processor before it has them all.
	Tick time.Duration
	// Quiet is how long the process must stay under QuietShare before it
	// goes down to one processor (default 1 s).
	Quiet time.Duration
	// QuietShare is the share of one core under which the process counts
	// as idle over Quiet (default 0.2).
	QuietShare float64
	// BusyShare is the share of one core, over a single tick, at which a
	// process on one processor gets them all back (default 0.5).
	BusyShare float64
	Log       *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Tick <= 0 {
		o.Tick = 200 * time.Millisecond
	}
	if o.Quiet <= 0 {
		o.Quiet = time.Second
	}
	if o.QuietShare <= 0 {
		o.QuietShare = 0.2
	}
	if o.BusyShare <= 0 {
		o.BusyShare = 0.5
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// ShrinkWhenIdle holds the process on one P while it is nearly idle,
// and gives it every P back as soon as it works, until stop is called,
// which gives them back for good. It does nothing when
// GOMAXPROCS is set in the environment (the operator's choice stands) or
// the process has a single processor anyway. Several servers in one
// process (tests) share one governor, which runs until the last stops.
func ShrinkWhenIdle(o Options) (stop func()) {
	if !governable() {
		return func() {}
	}
	process.Lock()
	defer process.Unlock()
	if process.users == 0 {
		process.stop = start(o.withDefaults(), processCPU)
	}
	process.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			process.Lock()
			defer process.Unlock()
			if process.users--; process.users == 0 {
				process.stop()
			}
		})
	}
}

// process is the one governor of the process, shared by every call.
var process struct {
	sync.Mutex
	users int
	stop  func()
}

// working is the GOMAXPROCS ShrinkWhenIdle gives back (0: not shrinking).
var working atomic.Int64

func governable() bool {
	return !operatorChose() && runtime.GOMAXPROCS(0) > 1
}

func start(o Options, cpu func() time.Duration) (stop func()) {
	full := runtime.GOMAXPROCS(0)
	working.Store(int64(full))
	g := newGovernor(o)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(o.Tick)
		defer tick.Stop()
		last := cpu()
		for {
			select {
			case <-done:
				runtime.GOMAXPROCS(full)
				working.Store(0)
				return
			case <-tick.C:
			}
			now := cpu()
			switch g.observe(now - last) {
			case shrink:
				runtime.GOMAXPROCS(1)
				o.Log.Debug("idle: one processor", "component", "procs")
			case grow:
				runtime.GOMAXPROCS(full)
				o.Log.Debug("busy: every processor", "component", "procs", "procs", full)
			}
			last = now
		}
	}()
	return func() { close(done); <-finished }
}

// processCPU is the CPU the process has used so far, every thread's, in
// user and kernel mode.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type change int

const (
	keep change = iota
	shrink
	grow
)

// governor decides, tick by tick, from the CPU the process used.
type governor struct {
	o      Options
	shrunk bool
	// recent is the CPU of the last ticks since the last change, at most
	// Quiet's worth.
	recent []time.Duration
	ticks  int
}

func newGovernor(o Options) *governor {
	return &governor{o: o, ticks: max(int(o.Quiet/o.Tick), 1)}
}

// observe is told the CPU the process used over the tick that just ended
// and says what to do.
func (g *governor) observe(used time.Duration) change {
	if g.shrunk {
		if used >= time.Duration(g.o.BusyShare*float64(g.o.Tick)) {
			g.shrunk, g.recent = false, g.recent[:0]
			return grow
		}
		return keep
	}
	g.recent = append(g.recent, used)
	if len(g.recent) > g.ticks {
		g.recent = g.recent[1:]
	}
	if len(g.recent) < g.ticks {
		return keep
	}
	var sum time.Duration
	for _, u := range g.recent {
		sum += u
	}
	if sum > time.Duration(g.o.QuietShare*float64(g.o.Quiet)) {
		return keep
	}
	g.shrunk, g.recent = true, g.recent[:0]
	return shrink
}

package latency

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/iolatency"
	"github.com/coffer-backup/coffer/internal/policy"
)

// congested is a latency source 50 ms an operation, above any threshold
// the test sets.
type congested struct {
	mu sync.Mutex
	c  iolatency.Counters
}

func (s *congested) Name() string { return "scripted array" }

func (s *congested) Read(context.Context) (iolatency.Counters, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.Ops += 10
	s.c.Time += 500 * time.Millisecond
	return s.c, nil
}

// events collects a unit's log lines.
type events struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func (e *events) record(level, kind, msg string, _ map[string]any) {
	e.mu.Lock()
	e.lines = append(e.lines, level+" "+kind+" "+msg)
	e.mu.Unlock()
	select {
	case e.added <- struct{}{}:
	default:
	}
}

func (e *events) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestWatchThrottlesAUnitOnACongestedDatastore joins a unit reading from
// a watched datastore whose latency stays above the threshold: its
// limiter is slowed (the unit's log says so, the metrics show its rate),
// a unit on another datastore is not watched, and once the unit leaves
// the monitor stops and the log says it ended throttled.
func TestWatchThrottlesAUnitOnACongestedDatastore(t *testing.T) {
	src := &congested{}
	w := NewWatch(func(conn, ds string) []iolatency.Source {
		if conn != "c1" || ds != "ds1" {
			t.Errorf("sources asked for %s/%s", conn, ds)
		}
		return []iolatency.Source{src}
	})
	control := policy.LatencyControls{{Datastores: []string{"ds1"}, Threshold: policy.Duration(5 * time.Millisecond),
		MinRate: 1 << 20, Interval: policy.Duration(20 * time.Millisecond)}}
	ev := &events{added: make(chan struct{}, 1)}
	other := w.Join(Unit{Control: control, Connection: "c1", VM: "quiet", Datastores: []string{"ds2"}, Shares: 1000, Event: ev.record})
	if len(other) != 0 {
		t.Fatalf("a unit on an unwatched datastore has throttles: %d", len(other))
	}
	ths := w.Join(Unit{Control: control, Connection: "c1", Policy: "p", VM: "busy", Datastores: []string{"ds1", "ds2"}, Shares: 1000,
		Event: ev.record})
	if len(ths) != 1 {
		t.Fatalf("throttles: %d, want 1 (ds1)", len(ths))
	}
	if ths.Nice() != policy.DefaultCPUNice {
		t.Errorf("nice %d, want the default %d", ths.Nice(), policy.DefaultCPUNice)
	}
	if !ev.has("watched through the VMs' disks only") {
		t.Errorf("no note that ds1 has no block device: %q", ev.lines)
	}
	lim := ths.Limit(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reading := make(chan error, 1)
	go func() { // reads as fast as the limiter lets it, until slowed
		for ctx.Err() == nil {
			if err := lim.WaitN(ctx, 64<<10); err != nil {
				reading <- nil
				return
			}
		}
		reading <- nil
	}()
	for !ev.has("reads slowed to") {
		select {
		case <-ev.added:
		case <-ctx.Done():
			t.Fatalf("not throttled within 30 s: %q", ev.lines)
		}
	}
	ds := w.Datastores()
	if len(ds) != 1 || ds[0].Datastore != "ds1" || !ds[0].Congested || len(ds[0].Readers) != 1 || ds[0].Readers[0].Rate <= 0 ||
		ds[0].Readers[0].Policy != "p" || ds[0].Source != "scripted array" {
		t.Fatalf("watched datastores: %+v", ds)
	}
	cancel()
	<-reading
	ths.Leave()
	if !ev.has("were throttled until the end") {
		t.Errorf("no note that the unit ended throttled: %q", ev.lines)
	}
	if left := w.Datastores(); len(left) != 0 {
		t.Fatalf("datastores still watched after the unit left: %+v", left)
	}
}

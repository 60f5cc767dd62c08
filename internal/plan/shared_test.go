package plan

import (
	"fmt"
	"testing"
	"time"
)

// recorded is n tasks with only a recorded transfer each, of the given
// seconds alone, queued in the order given (Size decreasing).
func recorded(alone ...float64) []Task {
	var ts []Task
	for k, d := range alone {
		ts = append(ts, Task{Name: fmt.Sprint("vm-", k), Size: int64(len(alone) - k), Transfer: Fixed(d), TransferLoad: 1})
	}
	return ts
}

func predictP50(t *testing.T, in Input) time.Duration {
	t.Helper()
	p, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.P50 != p.P90 || p.Runs != 1 {
		t.Fatalf("a model without variance: P50 %s P90 %s in %d runs", p.P50, p.P90, p.Runs)
	}
	return p.P50
}

// Two recorded transfers of 1 s and 3 s alone on a CPU that serialises
// them (σ = 1: F(n) = n), both at once: each moves at 1/2 until the
// first has done its 1 s, at t = 2; the second has then done 1 s of its
// 3 and does the 2 left alone, ending at 4 (the work of both, as a CPU
// shared by two). Fixed at its start, the second took 3·F(2) = 6 s.
func TestRecordedTransfersSpeedUpWhenOthersEnd(t *testing.T) {
	in := Input{Tasks: recorded(1, 3), Concurrency: 2, TransferGrowth: CostGrowth{Base: 1, Sigma: 1}}
	if got := predictP50(t, in); got != 4*time.Second {
		t.Errorf("P50 %s, want 4s", got)
	}
}

// σ = 0.5, F(n) = (n+1)/2, three transfers of 1, 2 and 4 s alone, all at
// once. F(3) = 2: the first ends at t = 2, the others having done 1 s
// each. F(2) = 1.5: the second's 1 s left takes 1.5 s, to t = 3.5, while
// the third does 1 more. F(1) = 1: the third's 2 s left end it at 5.5.
// Fixed at the start, the third took 4·F(3) = 8 s.
func TestRecordedTransfersReRatedAtEachEnd(t *testing.T) {
	in := Input{Tasks: recorded(1, 2, 4), Concurrency: 3, TransferGrowth: CostGrowth{Base: 1, Sigma: 0.5}}
	if got := predictP50(t, in); got != 5500*time.Millisecond {
		t.Errorf("P50 %s, want 5.5s", got)
	}
	// The critical path's time is the last task's transfer, 5.5 s.
	p, _ := Predict(in)
	if want := fmt.Sprint([]Share{{"transfer (as recorded)", 1}}); fmt.Sprint(p.CriticalPath.Work) != want {
		t.Errorf("work %v, want %s", p.CriticalPath.Work, want)
	}
}

// A task starting in the middle re-rates the others: σ = 1, concurrency
// 2, transfers of 3, 1 and 1 s alone, in that queue order. The first two
// move at 1/2: the second ends at t = 2, the first has 2 s left; the
// third takes its slot, both at 1/2: the third ends at t = 4, the first
// with 1 s left, alone to t = 5. The three tasks' work, 5 s, on a CPU
// shared by all.
func TestRecordedTransfersReRatedWhenATaskStarts(t *testing.T) {
	in := Input{Tasks: recorded(3, 1, 1), Concurrency: 2, TransferGrowth: CostGrowth{Base: 1, Sigma: 1}}
	if got := predictP50(t, in); got != 5*time.Second {
		t.Errorf("P50 %s, want 5s", got)
	}
}

// A task in a phase that does not grow still counts in flight: σ = 1 for
// transfers only, task a a transfer of 2 s alone, task b a snapshot of
// 1 s (not scaled) then a transfer of 1 s alone. Until t = 1, n = 2: a
// moves at 1/2 and has done 0.5 s. From t = 1 both transfers move at
// 1/2: b's 1 s ends at t = 3, a having done 1.5 s; a's last 0.5 s alone
// ends at 3.5.
func TestTasksInFixedPhasesShareToo(t *testing.T) {
	ts := []Task{
		{Name: "a", Size: 2, Transfer: Fixed(2), TransferLoad: 1},
		{Name: "b", Size: 1, Snapshot: Fixed(1), Transfer: Fixed(1), TransferLoad: 1},
	}
	in := Input{Tasks: ts, Concurrency: 2, TransferGrowth: CostGrowth{Base: 1, Sigma: 1}}
	if got := predictP50(t, in); got != 3500*time.Millisecond {
		t.Errorf("P50 %s, want 3.5s", got)
	}
}

// A cost recorded at a load other than 1 is taken alone first: 4 s
// recorded at 2 in flight with σ = 1 is 2 s of work alone; two such
// tasks at once move at 1/2 and end at 4 s, as recorded.
func TestSharedWorkFromTheRecordedLoad(t *testing.T) {
	ts := recorded(4, 4)
	for i := range ts {
		ts[i].TransferLoad = 2
	}
	in := Input{Tasks: ts, Concurrency: 2, TransferGrowth: CostGrowth{Base: 1, Sigma: 1}}
	if got := predictP50(t, in); got != 4*time.Second {
		t.Errorf("P50 %s, want 4s", got)
	}
	in.Concurrency = 1 // one after the other, 2 s each
	if got := predictP50(t, in); got != 4*time.Second {
		t.Errorf("one at a time: P50 %s, want 4s", got)
	}
}

// The same input and seed give the same prediction: the shared phases'
// order does not depend on the goroutines the runs are spread over.
func TestSharedPhasesAreDeterministic(t *testing.T) {
	var ts []Task
	for i := range 60 {
		ts = append(ts, Task{Name: fmt.Sprint(i), Size: int64(i % 7), Snapshot: Dist{Mean: 1, StdDev: 0.5}, Load: 1,
			Transfer: Dist{Mean: 2, StdDev: 1}, TransferLoad: 1, Release: Dist{Mean: 0.5, StdDev: 0.2}})
	}
	in := Input{Tasks: ts, Concurrency: 16, Growth: CostGrowth{Base: 1, Sigma: 0.1}, TransferGrowth: CostGrowth{Base: 1, Sigma: 0.9, Kappa: 0.001},
		TransferSpread: 0.2, RunSpread: 0.1, Runs: 50, Seed: 7}
	a, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Predict(in)
	if a.P50 != b.P50 || a.P90 != b.P90 || a.Bottleneck != b.Bottleneck {
		t.Errorf("two predictions differ: %s/%s %q and %s/%s %q", a.P50, a.P90, a.Bottleneck, b.P50, b.P90, b.Bottleneck)
	}
}

package backup

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
)

// TestIDOrderPassesIDsInOrder feeds the spans of a disk as the pipeline
// does (holes, reused spans and read spans mixed, reads finishing in any
// order with at most window of them in flight) and checks that the IDs
// come out in span order, each right, and that what the order holds is
// bounded by the spans in flight, not by the disk.
func TestIDOrderPassesIDsInOrder(t *testing.T) {
	const n, window = 20000, 16
	rng := rand.New(rand.NewPCG(1, 2))
	prev := make([]id.ID, n)
	want := make([]id.ID, n)
	kinds := make([]spanKind, n)
	for i := range n {
		prev[i] = testID(uint64(i) + 1<<40)
		kinds[i] = spanKind(rng.IntN(3))
		// Long runs of holes, as on a sparse disk.
		if i%5000 < 3000 {
			kinds[i] = spanHole
		}
		switch kinds[i] {
		case spanPrev:
			want[i] = prev[i]
		case spanRead:
			want[i] = testID(uint64(i) + 1)
		}
	}
	var got []id.ID
	o := newIDOrder(context.Background(), IDList(prev), func(i int, x id.ID) error {
		if i != len(got) {
			t.Fatalf("span %d passed after %d spans", i, len(got))
		}
		got = append(got, x)
		return nil
	})
	o.maxRuns = 64
	var inFlight []int
	held := 0
	finishOne := func() {
		k := rng.IntN(len(inFlight))
		i := inFlight[k]
		inFlight = append(inFlight[:k], inFlight[k+1:]...)
		if err := o.set(i, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		for o.full() {
			finishOne() // what workers do while the feeder waits
		}
		if err := o.feed(i, kinds[i]); err != nil {
			t.Fatal(err)
		}
		if kinds[i] == spanRead {
			inFlight = append(inFlight, i)
			if len(inFlight) == window {
				finishOne()
			}
		}
		held = max(held, len(o.runs)+len(o.done))
	}
	for len(inFlight) > 0 {
		finishOne()
	}
	if o.passed() != n || len(got) != n {
		t.Fatalf("%d of %d IDs passed", len(got), n)
	}
	for i := range n {
		if got[i] != want[i] {
			t.Fatalf("span %d (kind %d): got %s, want %s", i, kinds[i], got[i].Short(), want[i].Short())
		}
	}
	// Runs are bounded, and each span in flight holds at most an ID.
	if held > o.maxRuns+window {
		t.Fatalf("the order held %d entries with %d spans in flight", held, window)
	}
}

// TestIDOrderStopsAtTheFirstError checks that a failing disk map stops
// the order: its error comes back to every later caller.
func TestIDOrderStopsAtTheFirstError(t *testing.T) {
	fail := errors.New("store full")
	calls := 0
	o := newIDOrder(context.Background(), nil, func(i int, x id.ID) error {
		calls++
		if i == 2 {
			return fail
		}
		return nil
	})
	for i := range 5 {
		err := o.feed(i, spanHole)
		if (i >= 2) != errors.Is(err, fail) {
			t.Fatalf("span %d: %v", i, err)
		}
	}
	if err := o.set(7, id.ID{}); !errors.Is(err, fail) || calls != 3 {
		t.Fatalf("after the error: %v, %d calls", err, calls)
	}
}

func testID(v uint64) id.ID {
	var x id.ID
	for k := range 8 {
		x[k] = byte(v >> (8 * k))
	}
	return x
}

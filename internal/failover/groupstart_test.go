package failover

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestGroupStartsAtOnceAndEndsInPlanOrder starts a group of as many VMs
// as may start at once: each start waits until all of them are running
// (which a sequential start never reaches), then they end last to first,
// and the run still hears of them first to last.
func TestGroupStartsAtOnceAndEndsInPlanOrder(t *testing.T) {
	n := maxGroupStarts
	var all sync.WaitGroup
	all.Add(n)
	allIn := make(chan struct{})
	go func() { all.Wait(); close(allIn) }()
	finished := make([]chan struct{}, n+1)
	for i := range finished {
		finished[i] = make(chan struct{})
	}
	close(finished[n])
	var order []int
	startGroup(n, func(i int) {
		all.Done()
		select {
		case <-allIn:
		case <-time.After(time.Minute):
			t.Errorf("start %d: the group's other starts did not run beside it", i)
		}
		<-finished[i+1] // the last ends first
		close(finished[i])
	}, func(i int) { order = append(order, i) })
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
		t.Fatalf("the run heard of the starts in the order %v, not %v", order, want)
	}
}

// TestGroupStartsAreBounded starts a group of three times as many VMs as
// may start at once, each waiting until its batch of maxGroupStarts
// (VMs 0-7, 8-15, ...) has come in: maxGroupStarts run together, never
// more, and the run hears of every one in plan order.
func TestGroupStartsAreBounded(t *testing.T) {
	n := 3 * maxGroupStarts
	var mu sync.Mutex
	in := sync.NewCond(&mu)
	entered, running, most := 0, 0, 0
	var order []int
	startGroup(n, func(i int) {
		mu.Lock()
		defer mu.Unlock()
		entered++
		running++
		most = max(most, running)
		in.Broadcast()
		for entered < (i/maxGroupStarts+1)*maxGroupStarts {
			in.Wait()
		}
		running--
	}, func(i int) { order = append(order, i) })
	if most != maxGroupStarts {
		t.Fatalf("%d starts ran together, not %d", most, maxGroupStarts)
	}
	if len(order) != n || !slices.IsSorted(order) {
		t.Fatalf("the run heard of the starts in the order %v", order)
	}
}

package backup

import (
	"fmt"
	"math/rand/v2"
)

// Change tracking that checks itself. Bugs in change tracking have
// silently corrupted backups in the field (VMware's CBT bugs are the
// famous case): a span written behind the tracker's back is reused from
// the previous point, and every later point inherits the stale data. So
// an incremental also reads a small random sample of the spans change
// tracking calls unchanged and compares their IDs with the previous
// point's. One that differs means the tracker cannot be trusted for this
// disk: the disk is read again in full at once (so this point is whole),
// its change token is dropped (so the next backup reads it in full and
// starts a new chain), and the task and the point say so.

// DefaultChangeCheckSpans is how many unchanged spans of each disk an
// incremental reads to check its change tracking, unless Options say
// otherwise. Issue 18 wants the default to cost under 2% of an
// incremental's time. On a quiet machine bench/libvirt priced a sampled
// span of 256 KiB at 0.27-0.39 ms (three runs), against incrementals of
// 0.24-0.31 s after 2% of its 4 GiB guest's used space was rewritten (two
// disks): 6 spans per disk cost 1.1-2.0% of that small incremental (8
// cost 2.6%), less the larger it is. Six still catch a tracker that
// missed three spans in four with probability 1-(1/4)^6 per incremental
// (TestStaleBitmapIsCaught).
const DefaultChangeCheckSpans = 6

// checkSample picks up to k random spans among those change tracking
// calls unchanged and that hold data now (allocated), by reservoir
// sampling over one pass of the disk's spans, in memory of k entries.
func checkSample(d Disk, prev Previous, n, cs int, k int) map[int]bool {
	if k <= 0 || !d.ChangedValid || prev == nil {
		return nil
	}
	alloc := newCursor(d.Allocated, d.Size)
	changed := changedCursor(d)
	res := make([]int, 0, k)
	seen := 0
	for i := range n {
		off := int64(i) * int64(cs)
		length := min(int64(cs), d.Size-off)
		if changed.overlaps(off, length) || !alloc.overlaps(off, length) {
			continue
		}
		seen++
		if len(res) < k {
			res = append(res, i)
		} else if j := rand.IntN(seen); j < k {
			res[j] = i
		}
	}
	out := make(map[int]bool, len(res))
	for _, i := range res {
		out[i] = true
	}
	return out
}

// distrustWarning is what the point and the task log say when the check
// found change tracking wrong.
func distrustWarning(checked, differ int) string {
	return fmt.Sprintf("change tracking missed changes: %d of %d sampled spans it called unchanged differ from the previous point; "+
		"the whole disk was read again, and its change tracking is distrusted (the next backup reads it in full)", differ, checked)
}

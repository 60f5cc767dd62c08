package plan

import (
	"testing"
	"time"
)

// A VM's storage figures from its runs: new and zero bytes where the
// runs recorded them; before that, what incrementals read, and what a
// differential read over the runs since its full.
func TestStorageFromRuns(t *testing.T) {
	at := func(d int) time.Time { return monday.AddDate(0, 0, d) }
	recorded := []storedRun{
		{at: at(1), mode: "incremental", read: 30, stored: 10, logical: 1000, added: 20, zero: 600},
		{at: at(0), mode: "full", read: 400, stored: 200, logical: 1000, added: 400, zero: 600}, // the first point: no change
		{at: at(2), mode: "full", read: 400, stored: 20, logical: 1000, added: 40, zero: 580},
	}
	if h := storageOf(recorded); h != (StorageHistory{Used: 420, UsedFrom: UsedRecorded, Change: 30, ChangeFrom: FromNew,
		Reduction: 230.0 / 460, ReductionFrom: FromNew}) {
		t.Errorf("recorded: %+v", h)
	}
	old := []storedRun{
		{at: at(0), mode: "full", read: 400, stored: 200, logical: 1000, added: -1, zero: -1},
		{at: at(1), mode: "differential", read: 10, stored: 5, logical: 1000, added: -1, zero: -1},
		{at: at(2), mode: "differential", read: 30, stored: 10, logical: 1000, added: -1, zero: -1},
	}
	// Differentials of 10 after one run and 30 after two: 10 and 15 a run.
	if h := storageOf(old); h != (StorageHistory{Used: 400, UsedFrom: UsedFullRead, Change: 12.5, ChangeFrom: FromRead,
		Reduction: 215.0 / 440, ReductionFrom: FromRead}) {
		t.Errorf("before bytes_new: %+v", h)
	}
	if h := storageOf(old[1:]); h.UsedFrom != UsedDisks || h.Used != 1000 || h.ChangeFrom != "" {
		t.Errorf("no full, no zeros, differentials without their full: %+v", h)
	}
}

package plan

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// StorageHistory is what a VM's recorded runs say of what its points
// add to the repository: the capacity forecast's inputs (capacity.go).
// A zero figure was not recorded; the From fields say where each
// recorded one came from.
type StorageHistory struct {
	// Used is the non-zero bytes of the VM's disks: the disks' size
	// less what the newest run found zero or unallocated (task-done's
	// bytes_zero), else what its newest full read (allocated bytes),
	// else the disks' size.
	Used     int64
	UsedFrom string // UsedRecorded, UsedFullRead or UsedDisks
	// Change is the bytes a run adds before compression: what the
	// repository did not hold yet (task-done's bytes_new), the change
	// since the VM's previous point whatever the run's mode. Runs
	// recorded before bytes_new give it from what incrementals read,
	// and differentials' reads divided by the runs since their full.
	Change     float64
	ChangeFrom string // FromNew or FromRead
	// Reduction is the bytes stored per byte added (compression and
	// sealing), or per byte read for runs recorded before bytes_new.
	Reduction     float64
	ReductionFrom string // FromNew or FromRead
}

// Where a VM's storage figures came from.
const (
	UsedRecorded = "recorded"
	UsedFullRead = "full read"
	UsedDisks    = "disks"
	FromNew      = "new bytes"
	FromRead     = "bytes read"
)

// storedRun is one successful task as the capacity forecast reads it;
// added and zero are -1 where the run did not record them.
type storedRun struct {
	at                    time.Time
	mode                  string
	read, stored, logical int64
	added, zero           int64
}

// storageOf derives a VM's storage figures from its recorded runs.
func storageOf(runs []storedRun) StorageHistory {
	sort.Slice(runs, func(i, j int) bool { return runs[i].at.Before(runs[j].at) })
	var h StorageHistory
	for i := len(runs) - 1; i >= 0 && h.UsedFrom == ""; i-- {
		if r := runs[i]; r.zero >= 0 && r.logical > 0 {
			h.Used, h.UsedFrom = max(r.logical-r.zero, 0), UsedRecorded
		}
	}
	for i := len(runs) - 1; i >= 0 && h.UsedFrom == ""; i-- {
		if r := runs[i]; r.mode == "full" && r.read > 0 {
			h.Used, h.UsedFrom = r.read, UsedFullRead
		}
	}
	if h.UsedFrom == "" && len(runs) > 0 && runs[len(runs)-1].logical > 0 {
		h.Used, h.UsedFrom = runs[len(runs)-1].logical, UsedDisks
	}
	// The oldest recorded run may be the VM's first point, which adds
	// the whole disks, not a change: it is left out.
	var added float64
	n := 0
	for _, r := range runs[min(1, len(runs)):] {
		if r.added >= 0 {
			added += float64(r.added)
			n++
		}
	}
	if n > 0 {
		h.Change, h.ChangeFrom = added/float64(n), FromNew
	} else {
		var read float64
		sinceFull := -1 // runs since the newest full seen; -1: none seen
		for _, r := range runs {
			switch {
			case r.mode == "full":
				sinceFull = 0
				continue
			case sinceFull >= 0:
				sinceFull++
			}
			switch {
			case r.mode == "incremental":
				read += float64(r.read)
				n++
			case r.mode == "differential" && sinceFull > 0:
				// A differential reads every change since its full.
				read += float64(r.read) / float64(sinceFull)
				n++
			}
		}
		if n > 0 {
			h.Change, h.ChangeFrom = read/float64(n), FromRead
		}
	}
	var stored, ofNew, ofRead, storedRead float64
	for _, r := range runs {
		if r.added > 0 {
			stored += float64(r.stored)
			ofNew += float64(r.added)
		}
		if r.read > 0 {
			storedRead += float64(r.stored)
			ofRead += float64(r.read)
		}
	}
	switch {
	case ofNew > 0:
		h.Reduction, h.ReductionFrom = stored/ofNew, FromNew
	case ofRead > 0 && storedRead > 0:
		h.Reduction, h.ReductionFrom = storedRead/ofRead, FromRead
	}
	return h
}

// FirstRun is the time of the policy's first recorded run, looking no
// further back than since (Lookback): a policy with a run before since
// gets that run's time, which is all the forecast needs to know.
// Zero: none recorded.
func FirstRun(ctx context.Context, cat catalog.Catalog, policyName string, since time.Time) (time.Time, error) {
	f := catalog.JobFilter{Kind: catalog.KindBackupPolicy, Policy: policyName, Until: since, Limit: 1}
	older, err := cat.ListJobs(ctx, f)
	if err != nil {
		return time.Time{}, fmt.Errorf("plan: reading the first run of policy %s: %w", policyName, err)
	}
	if len(older) > 0 {
		return older[0].CreatedAt, nil
	}
	f.Until, f.Since, f.Limit = time.Time{}, since, 0
	list, err := cat.ListJobs(ctx, f)
	if err != nil {
		return time.Time{}, fmt.Errorf("plan: reading the first run of policy %s: %w", policyName, err)
	}
	var first time.Time
	for _, j := range list {
		if first.IsZero() || j.CreatedAt.Before(first) {
			first = j.CreatedAt
		}
	}
	return first, nil
}

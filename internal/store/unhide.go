package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// UnhideReport counts what Unhide removed.
type UnhideReport struct {
	Objects  int      `json:"objects"`         // objects whose current version changed
	Markers  int      `json:"delete_markers"`  // delete markers removed
	Versions int      `json:"versions"`        // unlocked versions stacked on a locked one, removed
	Names    []string `json:"names,omitempty"` // the objects, for the report
}

// Unhide undoes deletes and rewrites that hid locked data on a versioned
// store: a lock protects a version, not the name, so someone allowed to
// delete can still put a delete marker or an unlocked version on top, and
// every reader then sees that instead. For each object under prefix it
// removes the unlocked versions above the newest locked one, and every
// delete marker (one below the current version changes nothing), which
// makes the newest locked version current again, or, without one, the
// newest version. Nothing locked is touched; the repository writes neither
// markers nor unlocked versions on top of a locked one, so what is removed
// is not its own.
func Unhide(ctx context.Context, vs Versioned, prefix string, now time.Time) (UnhideReport, error) {
	var rep UnhideReport
	err := vs.Versions(ctx, prefix, func(name string, versions []Version) error {
		// Markers are placed among versions by time, which has a
		// second's resolution; versions alone are in their true order.
		var real, markers []Version
		for _, v := range versions {
			if v.Marker {
				markers = append(markers, v)
			} else {
				real = append(real, v)
			}
		}
		if len(real) == 0 {
			return nil // nothing to bring back
		}
		keep := len(real) - 1
		for i := len(real) - 1; i >= 0; i-- {
			if real[i].RetainUntil.After(now) {
				keep = i
				break
			}
		}
		stacked := real[keep+1:]
		if len(stacked)+len(markers) == 0 {
			return nil
		}
		// Newest first, so a failure half-way leaves the least on top.
		remove := append(slices.Clone(markers), stacked...)
		slices.Reverse(remove)
		for _, v := range remove {
			if err := vs.DeleteVersion(ctx, v); err != nil {
				return fmt.Errorf("unhide %s: %w", name, err)
			}
		}
		rep.Markers += len(markers)
		rep.Versions += len(stacked)
		rep.Objects++
		rep.Names = append(rep.Names, name)
		return nil
	})
	return rep, err
}

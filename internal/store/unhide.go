package store

import (
	"context"
	"fmt"
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
// removes what sits above the newest locked version (or, without one,
// the delete markers above the newest version), which makes that version
// current again. Nothing locked is touched; the repository writes neither
// markers nor unlocked versions on top of a locked one, so what is removed
// is not its own.
func Unhide(ctx context.Context, vs Versioned, prefix string, now time.Time) (UnhideReport, error) {
	var rep UnhideReport
	err := vs.Versions(ctx, prefix, func(name string, versions []Version) error {
		keep := -1 // the version to make current
		for i, v := range versions {
			if v.Marker {
				continue
			}
			if v.RetainUntil.After(now) || keep < 0 || !versions[keep].RetainUntil.After(now) {
				keep = i
			}
		}
		if keep < 0 || keep == len(versions)-1 {
			return nil
		}
		// Newest first, so a failure half-way leaves the least on top.
		for i := len(versions) - 1; i > keep; i-- {
			if err := vs.DeleteVersion(ctx, versions[i]); err != nil {
				return fmt.Errorf("unhide %s: %w", name, err)
			}
			if versions[i].Marker {
				rep.Markers++
			} else {
				rep.Versions++
			}
		}
		rep.Objects++
		rep.Names = append(rep.Names, name)
		return nil
	})
	return rep, err
}

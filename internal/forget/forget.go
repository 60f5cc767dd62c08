// Package forget removes backup points according to GFS retention rules.
// It only deletes manifests (and their disk maps); the chunks they used are
// reclaimed later by garbage collection, which never blocks backups.
package forget

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/retention"
)

// Options select what to forget.
type Options struct {
	Policy retention.Policy
	// Name and Tags restrict which sources are considered ("" / nil: all).
	Name   string
	Tags   map[string]string
	DryRun bool
	Loc    *time.Location // time zone for day/week/month buckets
	Now    func() time.Time
}

// Group is the verdict for the points of one source.
type Group struct {
	Source  repo.Source          `json:"source"`
	Keep    []retention.Decision `json:"keep"`
	Remove  []retention.Decision `json:"remove"`
	Skipped []string             `json:"skipped,omitempty"` // under retention lock
}

// Run applies the policy to each source separately.
func Run(ctx context.Context, r *repo.Repository, o Options) ([]Group, error) {
	if o.Policy.Empty() {
		return nil, fmt.Errorf("no keep rule given: refusing to forget everything (use --keep-last, --keep-daily, ...)")
	}
	if o.Loc == nil {
		o.Loc = time.Local
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	snaps, err := r.Snapshots(ctx, nil)
	if err != nil {
		return nil, err
	}
	bySource := map[string][]*repo.Snapshot{}
	var order []string
	for _, s := range snaps {
		if o.Name != "" && s.Source.VMName != o.Name || !hasTags(s.Tags, o.Tags) {
			continue
		}
		k := s.Source.Key()
		if _, ok := bySource[k]; !ok {
			order = append(order, k)
		}
		bySource[k] = append(bySource[k], s)
	}
	var groups []Group
	for _, k := range order {
		list := bySource[k]
		byID := map[string]*repo.Snapshot{}
		items := make([]retention.Item, len(list))
		for i, s := range list {
			byID[s.ID.String()] = s
			items[i] = retention.Item{ID: s.ID.String(), Time: s.Time, Protected: s.Protected}
		}
		g := Group{Source: list[0].Source}
		for _, d := range retention.Apply(o.Policy, items, o.Loc) {
			if d.Keep {
				g.Keep = append(g.Keep, d)
				continue
			}
			s := byID[d.ID]
			if s.RetainUntil.After(o.Now()) {
				g.Skipped = append(g.Skipped, fmt.Sprintf("%s is retained until %s", s.ID.Short(), s.RetainUntil.Format(time.RFC3339)))
				continue
			}
			g.Remove = append(g.Remove, d)
			if !o.DryRun {
				if err := r.DeleteSnapshot(ctx, s); err != nil {
					return groups, err
				}
			}
		}
		groups = append(groups, g)
	}
	return groups, nil
}

func hasTags(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

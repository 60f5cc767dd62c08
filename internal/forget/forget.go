// Package forget removes backup points according to GFS retention rules.
// It only deletes manifests (and their disk maps); the chunks they used are
// reclaimed later by garbage collection, which never blocks backups.
package forget

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/id"
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
	// ForgetBootVerified lets the rules remove the newest point of a
	// source whose boot verification passed; by default it is kept, so
	// that one restore point of each VM is known to boot.
	ForgetBootVerified bool
	Loc                *time.Location // time zone for day/week/month buckets
	Now                func() time.Time
}

// Group is the verdict for the points of one source.
type Group struct {
	Source repo.Source          `json:"source"`
	Keep   []retention.Decision `json:"keep"`
	Remove []retention.Decision `json:"remove"`
	// Locked are points the rules would remove but an object lock keeps.
	Locked []Locked `json:"locked,omitempty"`
}

// Locked is a point under object lock, and until when.
type Locked struct {
	ID    string    `json:"id"`
	Until time.Time `json:"until"`
}

// String says it the way logs and events do.
func (l Locked) String() string {
	return fmt.Sprintf("%s is retained until %s", l.ID[:min(8, len(l.ID))], l.Until.Format(time.RFC3339))
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
	snaps, err := r.Points(ctx, nil)
	if err != nil {
		return nil, err
	}
	proven := map[id.ID]bool{}
	if !o.ForgetBootVerified {
		if proven, err = bootverify.Proven(ctx, r); err != nil {
			return nil, fmt.Errorf("reading which points passed boot verification (kept unless --forget-boot-verified): %w", err)
		}
	}
	bySource := map[string][]*repo.Point{}
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
		byID := map[string]*repo.Point{}
		items := make([]retention.Item, len(list))
		for i, s := range list {
			byID[s.ID.String()] = s
			items[i] = retention.Item{ID: s.ID.String(), Time: s.Time, Protected: s.Protected, BootVerified: proven[s.ID]}
		}
		g := Group{Source: list[0].Source}
		for _, d := range retention.Apply(o.Policy, items, o.Loc) {
			if d.Keep {
				g.Keep = append(g.Keep, d)
				continue
			}
			s := byID[d.ID]
			if s.RetainUntil.After(o.Now()) {
				g.Locked = append(g.Locked, Locked{ID: s.ID.String(), Until: s.RetainUntil})
				continue
			}
			if !o.DryRun {
				if err := r.DeletePoint(ctx, s); err != nil {
					// What was removed so far is returned, so that the
					// caller can bring the catalog in step with it.
					return append(groups, g), err
				}
			}
			g.Remove = append(g.Remove, d)
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

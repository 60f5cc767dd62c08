package fleetops

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// mediaCopyScheduled runs a scheduled media copy: the newest point of
// each source of the repository goes to the media set of the run's slot
// (maintenance.Job.SetFor: the pool itself, or the GFS set of its
// period), unless that set holds it already (a source with no new
// point since the set's last copy).
func (s Ops) mediaCopyScheduled(ctx context.Context, j maintenance.Job, slot time.Time) error {
	set := j.SetFor(slot)
	newest, err := service.WithRepo(ctx, s.Service, service.NamedRepo(j.Repository), service.NoLease, func(r *repo.Repository) ([]string, error) {
		points, err := r.Points(ctx, nil)
		if err != nil {
			return nil, err
		}
		latest := map[string]*repo.Point{}
		for _, p := range points {
			if q := latest[p.Source.Key()]; q == nil || p.Time.After(q.Time) {
				latest[p.Source.Key()] = p
			}
		}
		var ids []string
		for _, p := range latest {
			ids = append(ids, p.ID.String())
		}
		slices.Sort(ids)
		return ids, nil
	})
	if err != nil {
		return err
	}
	held, err := s.pointsInPool(ctx, set.Pool)
	if err != nil {
		return err
	}
	newest = slices.DeleteFunc(newest, func(id string) bool { return held[id] })
	if len(newest) == 0 {
		s.Logger().Info("every source's newest point is in the media set already: nothing to copy", "job", j.Name, "set", set.Pool)
		return nil
	}
	from, err := s.ForRepository(ctx, j.Repository)
	if err != nil {
		return err
	}
	_, err = from.Invoke(ctx, "media-copy", &api.MediaCopyInput{RepoParam: api.RepoParam{Repo: j.Repository}, Library: j.Library,
		Body: api.MediaCopyRequest{Pool: set.Pool, Points: newest, RetentionSeconds: set.Retention.Seconds()}})
	if err != nil {
		return fmt.Errorf("media set %s: %w", set.Pool, err)
	}
	return nil
}

// pointsInPool are the points the media catalogue has on a pool's
// volumes.
func (s Ops) pointsInPool(ctx context.Context, pool string) (map[string]bool, error) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	vols, err := cat.ListMediaVolumes(ctx, pool)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, v := range vols {
		segs, err := cat.ListMediaSegments(ctx, catalog.MediaSegmentFilter{Barcode: v.Barcode})
		if err != nil {
			return nil, err
		}
		for _, sg := range segs {
			held[sg.Point] = true
		}
	}
	return held, nil
}

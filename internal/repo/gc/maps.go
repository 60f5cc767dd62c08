package gc

import (
	"bytes"
	"context"
	"strings"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

// mapRecSize is the fixed record size of a disk-map name in the external
// sorts (zero-padded). Coffer names maps "maps/<session>-<sequence>" (38
// bytes); an object under maps/ whose name does not fit is not coffer's
// and is never deleted.
const mapRecSize = 64

// mapRecord pads a disk-map name into a sort record; ok is false when it
// does not fit.
func mapRecord(name string, rec *[mapRecSize]byte) bool {
	if len(name) > mapRecSize || strings.IndexByte(name, 0) >= 0 {
		return false
	}
	*rec = [mapRecSize]byte{}
	copy(rec[:], name)
	return true
}

func mapName(rec []byte) string {
	if i := bytes.IndexByte(rec, 0); i >= 0 {
		rec = rec[:i]
	}
	return string(rec)
}

// usedMaps sorts the names of the disk maps of the given backup points.
func usedMaps(snaps []*repo.Point, o Options) (*extsort.Cursor, error) {
	s := extsort.New(mapRecSize, o.MemoryBudget, o.TempDir)
	var rec [mapRecSize]byte
	for _, sn := range snaps {
		for _, d := range sn.Disks {
			if mapRecord(d.Map, &rec) {
				if err := s.Add(rec[:]); err != nil {
					s.Close()
					return nil, err
				}
			}
		}
	}
	return s.Cursor(true)
}

// orphanMaps finds disk maps no manifest references, except those of live
// sessions (a backup writes its maps before its manifest); it returns them
// in ascending order.
func orphanMaps(ctx context.Context, r *repo.Repository, o Options, used *extsort.Cursor, live map[string]bool) (*extsort.Ordered, error) {
	listed := extsort.New(mapRecSize, o.MemoryBudget, o.TempDir)
	var rec [mapRecSize]byte
	err := r.Store().List(ctx, "maps/", func(fi store.ObjectInfo) error {
		session, _, _ := strings.Cut(strings.TrimPrefix(fi.Name, "maps/"), "-")
		if live[session] {
			return nil
		}
		if !mapRecord(fi.Name, &rec) {
			r.Logger().Warn("gc leaves alone an object under maps/ that is not a coffer disk map", "object", fi.Name)
			return nil
		}
		return listed.Add(rec[:])
	})
	if err != nil {
		listed.Close()
		return nil, err
	}
	orphans, err := extsort.NewOrdered(mapRecSize, o.TempDir)
	if err != nil {
		listed.Close()
		return nil, err
	}
	if err := used.Rewind(); err != nil {
		listed.Close()
		orphans.Close()
		return nil, err
	}
	err = listed.Iterate(true, func(rec []byte) error {
		found, err := used.SeekTo(rec)
		if err != nil || found {
			return err
		}
		return orphans.Add(rec)
	})
	if err != nil {
		orphans.Close()
		return nil, err
	}
	return orphans, nil
}

package service

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/repo"
)

// What several operations select of a point or of a repository: the
// points a copy takes (to a repository or to media), the disks a restore
// writes and where.

// CopySelection builds the predicate for a copy's selection.
func CopySelection(ctx context.Context, r *repo.Repository, in api.CopyRequest) (func(*repo.Point) bool, error) {
	want := map[string]bool{}
	for _, ref := range in.Points {
		s, err := r.FindPoint(ctx, ref)
		if err != nil {
			return nil, err
		}
		want[s.ID.String()] = true
	}
	newest := map[string]string{}
	if in.Latest {
		all, err := r.Points(ctx, nil)
		if err != nil {
			return nil, err
		}
		for _, s := range all { // oldest first: the last one wins
			newest[s.Source.Key()] = s.ID.String()
		}
	}
	return func(s *repo.Point) bool {
		if len(want) > 0 && !want[s.ID.String()] {
			return false
		}
		if in.VM != "" && !strings.EqualFold(s.Source.VMName, in.VM) {
			return false
		}
		return !in.Latest || newest[s.Source.Key()] == s.ID.String()
	}, nil
}

// PickDisks selects the disks of a point: all, or the one sel names
// (index, key or name).
func PickDisks(s *repo.Point, sel string) ([]repo.Disk, error) {
	if sel == "" {
		return s.Disks, nil
	}
	for i, d := range s.Disks {
		if d.Key == sel || d.Name == sel || strconv.Itoa(i) == sel {
			return []repo.Disk{d}, nil
		}
	}
	return nil, Invalidf("backup point %s has no disk %q", s.ID.Short(), sel)
}

// DiskTargets is where restored disks go: to itself for one disk; for
// several, into the directory to, each as INDEX-NAME.
func DiskTargets(to string, disks []repo.Disk) ([]string, error) {
	if len(disks) <= 1 {
		return []string{to}, nil
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(disks))
	for i, d := range disks {
		out = append(out, filepath.Join(to, fmt.Sprintf("%d-%s", i, filepath.Base(d.Name))))
	}
	return out, nil
}

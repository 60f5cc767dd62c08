package catalogexport

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
)

// unfinishedAge is how old an export without a manifest must be before
// Prune takes it for the leftover of an export that was killed rather
// than one still being written.
const unfinishedAge = 24 * time.Hour

// Delete deletes export id, its manifest first: interrupted, it leaves an
// unfinished export (which Prune deletes later), never one that lists but
// does not import.
func Delete(ctx context.Context, r *repo.Repository, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	names, err := r.CatalogExportObjects(ctx, id)
	if err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	if len(names) == 0 {
		return fmt.Errorf("export %s: %w", id, ErrNotFound)
	}
	if err := r.DeleteCatalogExportObject(ctx, id, ManifestName); err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	for _, n := range names {
		if err := r.DeleteCatalogExportObject(ctx, id, n); err != nil {
			return fmt.Errorf("export %s: %w", id, err)
		}
	}
	return nil
}

// Prune deletes all finished exports but the keep newest (0: none), and unfinished
// ones a day old (left by a killed export). It returns the IDs deleted.
func Prune(ctx context.Context, r *repo.Repository, keep int, now time.Time) ([]string, error) {
	finished, err := r.CatalogExportIDs(ctx, ManifestName)
	if err != nil {
		return nil, err
	}
	all, err := r.CatalogExportIDs(ctx, "")
	if err != nil {
		return nil, err
	}
	isFinished := map[string]bool{}
	for _, id := range finished {
		isFinished[id] = true
	}
	deleted := []string{}
	for _, id := range all {
		if CheckID(id) != nil {
			continue
		}
		created, _ := time.Parse(idTime, id[:strings.IndexByte(id, 'Z')+1])
		if isFinished[id] || now.Sub(created) < unfinishedAge {
			continue
		}
		if err := Delete(ctx, r, id); err != nil {
			return deleted, err
		}
		deleted = append(deleted, id)
	}
	var valid []string
	for _, id := range finished {
		if CheckID(id) == nil {
			valid = append(valid, id)
		}
	}
	for keep > 0 && len(valid) > keep {
		if err := Delete(ctx, r, valid[0]); err != nil {
			return deleted, err
		}
		deleted = append(deleted, valid[0])
		valid = valid[1:]
	}
	return deleted, nil
}

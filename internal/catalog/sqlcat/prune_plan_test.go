package sqlcat_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// TestPruneFindsOldJobsByTheirEnd: on SQLite, which plans without
// statistics, every step of PruneHistory finds old jobs through
// jobs_finished (the jobs that ended before the cut-off), never by
// reading every job of a status: in a catalog of a million finished jobs
// that read them all in each step, holding the write lock for seconds
// at every server start.
func TestPruneFindsOldJobsByTheirEnd(t *testing.T) {
	ctx := context.Background()
	cat, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	b := cat.(*sqlcat.Catalog).Backend()
	for _, q := range sqlcat.PruneSteps {
		rows, err := b.Query(ctx, "EXPLAIN QUERY PLAN "+q, time.Now().UnixMicro(), 100)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if strings.Contains(q, "FROM jobs") && !strings.Contains(p, "jobs_finished") || strings.Contains(p, "jobs_status") {
			t.Errorf("%s\nis planned as %s", q, p)
		}
	}
}

package sqlcat_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// SQLite plans without statistics: these tests pin the plans of the
// statements that must not read a whole table of a fleet's catalog.

// planner returns SQLite's plan of a statement, one step per line.
func planner(t *testing.T) func(q string, args ...any) string {
	_, plan := catalogPlanner(t)
	return plan
}

// catalogPlanner is planner with the catalog whose statements it plans.
func catalogPlanner(t *testing.T) (*sqlcat.Catalog, func(q string, args ...any) string) {
	ctx := context.Background()
	cat, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	b := cat.(*sqlcat.Catalog).Backend()
	return cat.(*sqlcat.Catalog), func(q string, args ...any) string {
		t.Helper()
		rows, err := b.Query(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		return strings.Join(plan, "; ")
	}
}

// TestPruneFindsOldJobsByTheirEnd: every step of PruneHistory finds old
// jobs through jobs_finished (the jobs that ended before the cut-off),
// never by reading every job of a status: in a catalog of a million
// finished jobs that read them all in each step, holding the write lock
// for seconds at every server start.
func TestPruneFindsOldJobsByTheirEnd(t *testing.T) {
	plan := planner(t)
	for _, q := range sqlcat.PruneSteps {
		p := plan(q, time.Now().UnixMicro(), 100)
		if strings.Contains(q, "FROM jobs") && !strings.Contains(p, "jobs_finished") || strings.Contains(p, "jobs_status") {
			t.Errorf("%s\nis planned as %s", q, p)
		}
	}
}

// TestPagesStartAtTheirCursor: a page of jobs or points after a cursor
// starts its index range at the cursor instead of scanning the index from
// the newest row down to it.
func TestPagesStartAtTheirCursor(t *testing.T) {
	plan := planner(t)
	now := time.Now().UnixMicro()
	for q, want := range map[string]string{
		sqlcat.Pages[0]: "SEARCH jobs USING COVERING INDEX jobs_created (created_at<?)",
		sqlcat.Pages[1]: "SEARCH backup_points USING INDEX points_time (taken_at<?)",
	} {
		args := []any{now, now, int64(7)}
		if strings.Contains(q, "backup_points") {
			args = []any{now, now, "p", "p", "r"}
		}
		if p := plan(q, args...); !strings.Contains(p, want) || strings.Contains(p, "SCAN") {
			t.Errorf("%s\nis planned as %s\nwant %s", q, p, want)
		}
	}
}

// TestInventoryPagesFollowTheirIndex: a page of the inventory after a
// cursor reads vms_listing from the cursor on, in the listing's order,
// never every VM of the fleet sorted.
func TestInventoryPagesFollowTheirIndex(t *testing.T) {
	plan := planner(t)
	p := plan(sqlcat.InventoryPage, "c", "c", "c", "n", "n", "i")
	if !strings.Contains(p, "SEARCH vms USING INDEX vms_listing (connection>?)") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("%s\nis planned as %s", sqlcat.InventoryPage, p)
	}
}

// TestRepositoryPagesFollowTheirIndex: a page of a repository's points
// (the console's repository page: 50 at a time, newest first), the first
// and one after a cursor, walks points_repository (repository, taken_at,
// id) from its start or the cursor in the page's order. Through the
// primary key (repository, id), SQLite sorted every point of the
// repository for each page of 50.
func TestRepositoryPagesFollowTheirIndex(t *testing.T) {
	cat, plan := catalogPlanner(t)
	cursor := catalog.PointCursor{Time: time.Now(), ID: "p", Repository: "r"}
	for _, f := range []catalog.BackupPointFilter{{Repository: "r", Limit: 50}, {Repository: "r", Limit: 50, After: cursor}} {
		q, args := cat.PointsQuery(f)
		if p := plan(q, args...); !strings.Contains(p, "USING INDEX points_repository (repository=?") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\nis planned as %s", q, p)
		}
	}
}

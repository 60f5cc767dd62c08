package sqlcat_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestNewestPointsGenericPlanOnPostgres: PostgreSQL runs a prepared
// statement with a generic plan after five runs, made without its
// arguments. The newest points of a page's VMs must then still be one
// index lookup per VM, never a scan of every point (a generic plan of a
// grouped join hashed the whole table: 118 ms for a page of 100 VMs).
func TestNewestPointsGenericPlanOnPostgres(t *testing.T) {
	dsn := testutil.StartPostgres(t)
	ctx := context.Background()
	cat, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	var points []catalog.BackupPoint
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for vm := range 200 {
		for i := range 10 {
			points = append(points, catalog.BackupPoint{Repository: "r", ID: fmt.Sprintf("p%d-%d", vm, i), Connection: "c",
				VMID: fmt.Sprintf("vm-%d", vm), VMName: fmt.Sprintf("vm-%d", vm), Mode: "incremental", Time: start.Add(time.Duration(i) * time.Hour)})
		}
	}
	if err := cat.PutBackupPoints(ctx, points); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"ANALYZE backup_points", "SET plan_cache_mode = force_generic_plan",
		"PREPARE newest(text[], text[]) AS " + sqlcat.Dialect{DollarPlaceholders: true}.Rebind(sqlcat.NewestOfVMs)} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE newest('{vm-1,vm-2}', '{c,c}')")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "Index Scan") || strings.Contains(text, "Seq Scan on backup_points") {
		t.Fatalf("the generic plan of the newest points does not look each VM up in an index:\n%s", text)
	}
	// And the statement answers what it plans: the newest of each.
	got, err := cat.NewestBackupPoints(ctx, []catalog.VMRef{{Connection: "c", ID: "vm-1"}, {Connection: "c", ID: "vm-2"}, {Connection: "c", ID: "none"}})
	if err != nil || len(got) != 2 || got[0].ID != "p1-9" && got[1].ID != "p1-9" {
		t.Fatalf("newest points: %+v %v", got, err)
	}
}

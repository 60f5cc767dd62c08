// Package catalogtest is the conformance suite every catalog.Catalog
// implementation must pass (SQLite and PostgreSQL run the same tests).
package catalogtest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Opener opens a handle to one database. Every call opens another handle
// to the same database, as another coffer process would.
type Opener func(ctx context.Context) (catalog.Catalog, error)

// Factory creates a fresh, empty database for one test and returns its
// Opener. Cleanup belongs to t.
type Factory func(t *testing.T) Opener

// Run runs the whole suite.
func Run(t *testing.T, newDB Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Jobs", testJobs},
		{"JobFilters", testJobFilters},
		{"Tasks", testTasks},
		{"TaskUpdatesAreAtomic", testTaskUpdatesAtomic},
		{"MissingReferences", testMissingReferences},
		{"Events", testEvents},
		{"BackupPoints", testBackupPoints},
		{"ReplaceBackupPoints", testReplaceBackupPoints},
		{"NewestBackupPoints", testNewestBackupPoints},
		{"NewestPointTimes", testNewestPointTimes},
		{"NewestPolicyPointTimes", testNewestPolicyPointTimes},
		{"ReplaceIsAtomicForReaders", testReplaceAtomicForReaders},
		{"VMs", testVMs},
		{"Inventory", testInventory},
		{"InventoryPaging", testInventoryPaging},
		{"InventoryBriefAndChosen", testInventoryBriefAndChosen},
		{"Times", testTimes},
		{"ReopenPersists", testReopen},
		{"MigrationIsIdempotent", testMigrationIdempotent},
		{"ConcurrentWriters", testConcurrentWriters},
		{"CancelledContext", testCancelled},
		{"Users", testUsers},
		{"DeleteUserCascades", testDeleteUserCascades},
		{"APITokens", testAPITokens},
		{"Sessions", testSessions},
		{"SetupTokens", testSetupTokens},
		{"ACL", testACL},
		{"LoginThrottle", testLoginThrottle},
		{"SecondFactors", testSecondFactors},
		{"PruneAccess", testPruneAccess},
		{"Audit", testAudit},
		{"UpdateAccessIsAtomic", testUpdateAccessAtomic},
		{"UpdateAccessIsSerialised", testUpdateAccessSerialised},
		{"Notifications", testNotifications},
		{"DeliveryFilters", testDeliveryFilters},
		{"ConcurrentClaims", testConcurrentClaims},
		{"JobTaskFields", testJobTaskFields},
		{"JobListing", testJobListing},
		{"JobLog", testJobLog},
		{"ConcurrentLogWriters", testConcurrentLogWriters},
		{"HeartbeatAndCancel", testHeartbeatAndCancel},
		{"AbandonJob", testAbandonJob},
		{"SupersedeTask", testSupersedeTask},
		{"PruneHistory", testPruneHistory},
		{"WatchJobs", testWatchJobs},
		{"ConfigObjects", testConfigObjects},
		{"UpdateConfigIsAtomic", testUpdateConfigIsAtomic},
		{"UpdateConfigIsSerialised", testUpdateConfigIsSerialised},
		{"Leases", testLeases},
		{"ConcurrentLeases", testConcurrentLeases},
		{"ClaimRuns", testClaimRuns},
		{"Media", testMedia},
		{"Workers", testWorkers},
		{"ConcurrentWorkerLoss", testConcurrentWorkerLoss},
		{"WorkerEvents", testWorkerEvents},
		{"WorkerTaskProgress", testWorkerTaskProgress},
		{"Replicas", testReplicas},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newDB(t))
		})
	}
}

// mustOpen opens a handle that is closed when the test ends.
func mustOpen(t *testing.T, open Opener) catalog.Catalog {
	t.Helper()
	c, err := open(context.Background())
	if err != nil {
		t.Fatalf("open catalog: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("%s: got %v, want an error wrapping catalog.ErrNotFound", what, err)
	}
}

func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// base is a fixed instant with sub-microsecond digits, so that tests show
// the microsecond truncation.
var base = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// at returns base + d in the stored precision.
func at(d time.Duration) time.Time { return base.Add(d).Truncate(time.Microsecond) }

func ids[T any](xs []T, id func(T) int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}

func jobID(j catalog.Job) int64   { return j.ID }
func taskID(x catalog.Task) int64 { return x.ID }

func pointIDs(ps []catalog.BackupPoint) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func testCancelled(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.CreateJob(ctx, &catalog.Job{Kind: "backup"}); err == nil {
		t.Fatal("CreateJob with a cancelled context succeeded")
	}
	if _, err := c.ListJobs(ctx, catalog.JobFilter{}); err == nil {
		t.Fatal("ListJobs with a cancelled context succeeded")
	}
	jobs, err := c.ListJobs(context.Background(), catalog.JobFilter{})
	ok(t, err)
	if len(jobs) != 0 {
		t.Fatalf("a cancelled CreateJob left %d job(s)", len(jobs))
	}
}

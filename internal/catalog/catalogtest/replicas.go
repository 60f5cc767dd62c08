package catalogtest

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// testReplicas: a standby's state is recorded and replaced run by run, a
// failure keeps the points and is cleared by the next good run, and a
// failure of a VM with no standby yet lists it with no point.
func testReplicas(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	rs, has := catalog.ReplicasOf(c)
	if !has {
		t.Fatal("the catalog keeps no replicas")
	}
	r := catalog.Replica{Replication: "dr", VM: "web", Host: "kvm9", Directory: "/srv/dr/web",
		SourceTime: at(0), ReplicatedAt: at(60e9), Points: `[{"seq":1}]`}
	ok(t, rs.PutReplica(ctx, r))
	r.SourceTime, r.ReplicatedAt, r.Points = at(3600e9), at(3660e9), `[{"seq":1},{"seq":2}]`
	ok(t, rs.PutReplica(ctx, r))
	ok(t, rs.PutReplica(ctx, catalog.Replica{Replication: "dr", VM: "web", Points: "[]", LastError: "disk full"}))
	ok(t, rs.PutReplica(ctx, catalog.Replica{Replication: "dr", VM: "db", Points: "[]", LastError: "network not mapped"}))
	ok(t, rs.PutReplica(ctx, catalog.Replica{Replication: "other", VM: "web", SourceTime: at(0), ReplicatedAt: at(0), Points: "[]"}))
	got, err := rs.ListReplicas(ctx, "dr")
	ok(t, err)
	if len(got) != 2 || got[0].VM != "db" || got[1].VM != "web" {
		t.Fatalf("replicas of dr: %+v", got)
	}
	want := r
	want.LastError = "disk full"
	if got[1] != want {
		t.Fatalf("after a failure: %+v, want %+v", got[1], want)
	}
	if db := got[0]; !db.SourceTime.IsZero() || db.Points != "[]" || db.LastError != "network not mapped" {
		t.Fatalf("a VM that never had a standby: %+v", db)
	}
	ok(t, rs.PutReplica(ctx, r))
	got, err = rs.ListReplicas(ctx, "")
	ok(t, err)
	if len(got) != 3 || got[2].LastError != "" || got[1].Replication != "dr" || got[2].Replication != "other" {
		t.Fatalf("all replicas after a good run: %+v", got)
	}
}

package forget_test

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/retention"
)

// putBootResult stores a boot verification of point, passed or not, as
// `coffer verify boot` does.
func putBootResult(t *testing.T, r *repo.Repository, s *repo.Point, passed bool) {
	t.Helper()
	b, err := (&bootverify.Result{PointID: s.ID.String(), Passed: passed}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.PutBootVerification(context.Background(), s.ID, b); err != nil {
		t.Fatal(err)
	}
}

func remaining(t *testing.T, r *repo.Repository) map[string]bool {
	t.Helper()
	snaps, err := r.Points(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range snaps {
		out[s.ID.String()] = true
	}
	return out
}

func TestForgetKeepsTheNewestBootVerifiedPoint(t *testing.T) {
	for _, forgetProven := range []bool{false, true} {
		ctx := context.Background()
		r := repotest.New(t, repo.InitOptions{})
		if _, err := (repotest.Synthetic{Points: 5, Disks: 1, References: 40}).Generate(ctx, r); err != nil {
			t.Fatal(err)
		}
		snaps, err := r.Points(ctx, nil) // oldest first
		if err != nil {
			t.Fatal(err)
		}
		putBootResult(t, r, snaps[0], true)  // an older proof, made redundant by snaps[1]
		putBootResult(t, r, snaps[1], true)  // the newest point that boots
		putBootResult(t, r, snaps[3], false) // a failed verification proves nothing
		groups, err := forget.Run(ctx, r, forget.Options{Policy: retention.Policy{Last: 1}, ForgetBootVerified: forgetProven})
		if err != nil {
			t.Fatal(err)
		}
		left := remaining(t, r)
		want := map[string]bool{snaps[4].ID.String(): true}
		if !forgetProven {
			want[snaps[1].ID.String()] = true
		}
		if len(left) != len(want) {
			t.Fatalf("forget-boot-verified=%v: %d points left, want %d (%v)", forgetProven, len(left), len(want), groups)
		}
		for x := range want {
			if !left[x] {
				t.Fatalf("forget-boot-verified=%v: point %s was removed", forgetProven, x[:8])
			}
		}
	}
}

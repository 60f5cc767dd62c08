package fleet

import (
	"context"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

// A job's units on a worker share one write session; another job gets its
// own; a failed unit's session is not shared again and is closed (its
// lease released) by its last unit; the worker's close releases the
// sessions no unit uses.
func TestJobUnitsShareAWriteSession(t *testing.T) {
	ctx := context.Background()
	r := repotest.NewLocal(t, repo.InitOptions{}).R
	u := newUnitWriters()
	sessions := func() int {
		t.Helper()
		leases, err := r.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range leases {
			if l.Kind == "backup" {
				n++
			}
		}
		return n
	}
	open := func(job int64) (*repo.Writer, func(error) error) {
		t.Helper()
		w, done, err := u.writer(ctx, r, job, SessionOwner("a", 1), "unit")
		if err != nil {
			t.Fatal(err)
		}
		return w, done
	}
	w1, done1 := open(1)
	w2, done2 := open(1)
	w3, done3 := open(2)
	if w1 != w2 || w1 == w3 || sessions() != 2 {
		t.Fatalf("job 1's units share %v, job 2's differs %v; %d sessions, want 2", w1 == w2, w1 != w3, sessions())
	}
	// A failed unit: its session is shared no more, and closes with its
	// last unit.
	if err := done1(errors.New("the unit failed")); err != nil {
		t.Fatal(err)
	}
	w4, done4 := open(1)
	if w4 == w1 || sessions() != 3 {
		t.Fatalf("a unit after a failed one shares its session (%v); %d sessions, want 3", w4 == w1, sessions())
	}
	if err := done2(nil); err != nil {
		t.Fatal(err)
	}
	if sessions() != 2 {
		t.Fatalf("the failed session's last unit ended: %d sessions, want 2", sessions())
	}
	for _, done := range []func(error) error{done3, done4} {
		if err := done(nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := u.close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sessions(); n != 0 {
		t.Fatalf("%d sessions left open after the worker's close", n)
	}
}

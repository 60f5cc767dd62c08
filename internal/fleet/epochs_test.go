package fleet

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The epochs the units are handed off under are the watch's: a worker it
// has not seen is left to the catalog, a lost one is refused at once
// (before its units are re-admitted), and a later look replaces both.
func TestEpochsFollowTheWatch(t *testing.T) {
	var e Epochs
	if _, known, _ := e.Of("a"); known {
		t.Fatal("a worker known before any look")
	}
	e.Observe([]Worker{{Name: "a", Epoch: 3, State: catalog.WorkerReady}, {Name: "b", Epoch: 1, State: catalog.WorkerLost}})
	if epoch, known, err := e.Of("a"); !known || err != nil || epoch != 3 {
		t.Fatalf("a: epoch %d known %v err %v, want 3", epoch, known, err)
	}
	if _, known, err := e.Of("b"); !known || err == nil {
		t.Fatalf("lost b: known %v err %v, want an error", known, err)
	}
	e.Lost([]Worker{{Name: "a", Epoch: 3}})
	if _, _, err := e.Of("a"); err == nil {
		t.Fatal("a declared lost: its epoch is still given")
	}
	// A declaration of an older registration leaves a later one alone.
	e.Observe([]Worker{{Name: "a", Epoch: 4, State: catalog.WorkerReady}})
	e.Lost([]Worker{{Name: "a", Epoch: 3}})
	if epoch, _, err := e.Of("a"); err != nil || epoch != 4 {
		t.Fatalf("a registered again: epoch %d err %v, want 4", epoch, err)
	}
}

package fleet

import (
	"slices"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// TestBootWorkersAreReadyQEMUHostsOfTheRepository: a scheduled boot
// verification goes only to a ready worker that can boot and reaches the
// point's repository (no listed repositories: every one).
func TestBootWorkersAreReadyQEMUHostsOfTheRepository(t *testing.T) {
	ws := []Worker{
		{Name: "any", State: catalog.WorkerReady, Reach: catalog.WorkerReach{CanBoot: true}},
		{Name: "main-only", State: catalog.WorkerReady, Reach: catalog.WorkerReach{CanBoot: true, Repositories: []string{"main"}}},
		{Name: "offsite-only", State: catalog.WorkerReady, Reach: catalog.WorkerReach{CanBoot: true, Repositories: []string{"offsite"}}},
		{Name: "no-qemu", State: catalog.WorkerReady},
		{Name: "draining", State: catalog.WorkerDraining, Reach: catalog.WorkerReach{CanBoot: true}},
		{Name: "lost", State: catalog.WorkerLost, Reach: catalog.WorkerReach{CanBoot: true}},
	}
	for repository, want := range map[string][]string{
		"main": {"any", "main-only"}, "offsite": {"any", "offsite-only"}, "": {"any"}, "default": {"any"},
	} {
		if got := BootWorkers(ws, repository); !slices.Equal(got, want) {
			t.Errorf("repository %q: %v, want %v", repository, got, want)
		}
	}
}

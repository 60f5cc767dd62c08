package planops

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/service"
)

// What a repository's store can hold, for the capacity forecast's full
// date: a directory's free space; an object store's only from the
// configured capacity less the newest usage sample, and otherwise it
// says it is unknown and what to set.
func TestStoreSpace(t *testing.T) {
	ctx := context.Background()
	cat, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	now := time.Now()
	s := Ops{service.New(service.Config{Maintenance: &maintenance.Config{Capacity: map[string]maintenance.Size{"main": 100 << 30}}})}
	space := func(name, location string) api.PlanRepositoryCapacity {
		rc := api.PlanRepositoryCapacity{Name: name}
		s.storeSpace(ctx, cat, &rc, repositoryInfo{location: location, id: "rid-" + name, chunkSize: 1 << 18}, now)
		return rc
	}
	if rc := space("other", "s3://bucket/other"); rc.FreeBytes != -1 || rc.CapacityBytes != -1 ||
		!strings.Contains(rc.Capacity, "unknown: an object store tells no capacity; set maintenance capacity: {other: SIZE}") {
		t.Errorf("object store without a capacity: %+v", rc)
	}
	if rc := space("main", "s3://bucket/main"); rc.FreeBytes != -1 || rc.CapacityBytes != 100<<30 || !strings.Contains(rc.Capacity, "no usage sample") {
		t.Errorf("object store with a capacity, no usage recorded: %+v", rc)
	}
	u, _ := catalog.UsageOf(cat)
	for i, stored := range []int64{30 << 30, 40 << 30} {
		if err := u.AddUsageSample(ctx, catalog.UsageSample{Repository: "rid-main", At: now.Add(time.Duration(i-2) * time.Hour), StoredBytes: stored}); err != nil {
			t.Fatal(err)
		}
	}
	if rc := space("main", "s3://bucket/main"); rc.FreeBytes != 60<<30 || rc.StoredBytes != 40<<30 || rc.CapacityBytes != 100<<30 {
		t.Errorf("object store with a capacity and usage: %+v", rc)
	}
	if rc := space("local", t.TempDir()); rc.FreeBytes <= 0 || !strings.Contains(rc.Capacity, "file system") {
		t.Errorf("directory: %+v", rc)
	}
}

package service_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/restoreops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
	"github.com/coffer-backup/coffer/internal/store"
)

// testService is a service over a new local repository and a SQLite
// catalog in a temporary directory.
type testService struct {
	*service.Service
	t   *testing.T
	dir string
}

func newTestService(t *testing.T, wrap func(store.Store) store.Store) *testService {
	t.Helper()
	dir := t.TempDir()
	pw := func() ([]byte, error) { return []byte("correct horse"), nil }
	s := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), WrapStore: wrap, Local: true})
	if _, err := (repoops.Ops{Service: s}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("correct horse")}); err != nil {
		t.Fatal(err)
	}
	return &testService{Service: s, t: t, dir: dir}
}

// image writes a sparse disk image with random data in its first MiBs.
func (ts *testService) image(name string, dataMiB int) string {
	ts.t.Helper()
	p := filepath.Join(ts.dir, name)
	data := make([]byte, dataMiB<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		ts.t.Fatal(err)
	}
	if err := os.Truncate(p, 16<<20); err != nil {
		ts.t.Fatal(err)
	}
	return p
}

func (ts *testService) backup(name, path string) *api.BackupPoint {
	ts.t.Helper()
	p, err := backupops.Ops{Service: ts.Service}.BackupDisk(context.Background(), &api.BackupDiskInput{Body: api.BackupDiskRequest{Paths: []string{path}, Name: name}})
	if err != nil {
		ts.t.Fatal(err)
	}
	return p
}

func (ts *testService) catalogIDs() []string {
	ts.t.Helper()
	points, err := catalogPoints(context.Background(), ts.Service, api.ListCatalogPointsInput{})
	if err != nil {
		ts.t.Fatal(err)
	}
	var ids []string
	for _, p := range points {
		ids = append(ids, p.ShortID)
	}
	return ids
}

// TestForgetAndProtectKeepTheCatalogInStep: a console reading the catalog
// must not show forgotten points, nor stale protection.
func TestForgetAndProtectKeepTheCatalogInStep(t *testing.T) {
	ts := newTestService(t, nil)
	ctx := context.Background()
	img := ts.image("web.raw", 2)
	first := ts.backup("web", img)
	second := ts.backup("web", img)
	third := ts.backup("web", img)
	if got := ts.catalogIDs(); len(got) != 3 {
		t.Fatalf("catalog after three backups: %v", got)
	}
	res, err := repoops.Ops{Service: ts.Service}.Protect(ctx, &api.ProtectInput{Body: api.ProtectRequest{Points: []string{first.ShortID}}})
	if err != nil || len(res) != 1 || !res[0].Protected || res[0].CatalogWarning != "" {
		t.Fatalf("protect: %+v %v", res, err)
	}
	points, _ := catalogPoints(ctx, ts.Service, api.ListCatalogPointsInput{})
	for _, p := range points {
		if p.Protected != (p.ID == first.ID) {
			t.Fatalf("catalog says %s protected=%v", p.ShortID, p.Protected)
		}
	}
	// keep-last 1 keeps the third; the first is protected; the second goes,
	// from the repository and from the catalog.
	doc, err := repoops.Ops{Service: ts.Service}.Forget(ctx, &api.ForgetInput{Body: api.ForgetRequest{Keep: api.KeepRules{Last: 1}}})
	if err != nil || doc.CatalogWarning != "" || len(doc.Sources) != 1 || len(doc.Sources[0].Remove) != 1 || doc.Sources[0].Remove[0].PointID != second.ID {
		t.Fatalf("forget: %+v %v", doc, err)
	}
	got := strings.Join(ts.catalogIDs(), ",")
	if want := third.ShortID + "," + first.ShortID; got != want {
		t.Fatalf("catalog after forget lists %s, want %s", got, want)
	}
	repoPoints, _, err := repoops.Ops{Service: ts.Service}.RepositoryPoints(ctx, &api.ListPointsInput{})
	if err != nil || len(repoPoints) != 2 {
		t.Fatalf("repository after forget: %d points, %v", len(repoPoints), err)
	}
	// Releasing the protection reaches the catalog too.
	if _, err := (repoops.Ops{Service: ts.Service}).Protect(ctx, &api.ProtectInput{Body: api.ProtectRequest{Points: []string{first.ShortID}, Remove: true}}); err != nil {
		t.Fatal(err)
	}
	points, _ = catalogPoints(ctx, ts.Service, api.ListCatalogPointsInput{})
	for _, p := range points {
		if p.Protected {
			t.Fatalf("catalog still says %s is protected", p.ShortID)
		}
	}
}

// pausingStore holds the first read of a pack while armed, so that a test
// can act while an operation is in the middle of reading a point.
type pausingStore struct {
	store.Store
	gate *gate
}

type gate struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func (p pausingStore) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "data/") {
		p.gate.mu.Lock()
		armed := p.gate.armed
		p.gate.armed = false
		p.gate.mu.Unlock()
		if armed {
			close(p.gate.reached)
			<-p.gate.release
		}
	}
	return p.Store.Read(ctx, name, off, length)
}

// TestRestoreHoldsTheLease: while a restore reads a point, forgetting the
// point and collecting garbage deletes nothing it needs (gc defers the
// deletion to the restore's end), and the restore writes the point's
// bytes. Without the service's restore lease, gc would delete the packs
// under the restore.
func TestRestoreHoldsTheLease(t *testing.T) {
	g := &gate{reached: make(chan struct{}), release: make(chan struct{})}
	ts := newTestService(t, func(st store.Store) store.Store { return pausingStore{st, g} })
	ctx := context.Background()
	old := ts.image("old.raw", 3)
	want, _ := os.ReadFile(old)
	first := ts.backup("web", old)
	ts.backup("web", ts.image("new.raw", 3)) // shares nothing with the first

	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	target := filepath.Join(ts.dir, "restored.raw")
	restored := make(chan error, 1)
	go func() {
		_, err := restoreops.Ops{Service: ts.Service}.RestoreDisks(ctx, restoreInput(first.ID, target))
		restored <- err
	}()
	<-g.reached
	if _, err := (repoops.Ops{Service: ts.Service}).Forget(ctx, &api.ForgetInput{Body: api.ForgetRequest{Keep: api.KeepRules{Last: 1}}}); err != nil {
		t.Fatal(err)
	}
	rep, err := repoops.Ops{Service: ts.Service}.GC(ctx, &api.GCInput{})
	if err != nil || !rep.Deferred || rep.PacksPlanned == 0 || rep.PacksDeleted != 0 {
		t.Fatalf("gc during the restore: %+v %v", rep, err)
	}
	close(g.release)
	if err := <-restored; err != nil {
		t.Fatalf("restore: %v", err)
	}
	got, _ := os.ReadFile(target)
	if !bytes.Equal(got, want) {
		t.Fatal("the restored disk differs from the forgotten point")
	}
	// Once the restore has ended, the deletion goes ahead.
	rep, err = repoops.Ops{Service: ts.Service}.GC(ctx, &api.GCInput{})
	if err != nil || rep.Deferred || rep.PacksDeleted == 0 {
		t.Fatalf("gc after the restore: %+v %v", rep, err)
	}
	if _, err := (repoops.Ops{Service: ts.Service}).Verify(ctx, &api.VerifyInput{Body: api.VerifyRequest{ReadData: true}}); err != nil {
		t.Fatalf("verify after gc: %v", err)
	}
	if _, err := (restoreops.Ops{Service: ts.Service}).RestoreDisks(ctx, restoreInput(first.ID, target+"2")); service.Classify(err) != api.NotFound {
		t.Fatalf("restoring the forgotten point after gc: %v (class %s)", err, service.Classify(err))
	}
}

// restoreInput restores every disk of point to path.
func restoreInput(point, to string) *api.RestoreDiskInput {
	return &api.RestoreDiskInput{PointParam: api.PointParam{Point: point}, Body: api.RestoreRequest{To: to}}
}

// catalogPoints are the catalog's points (a page of at most 1,000) as the
// local operator sees them.
func catalogPoints(ctx context.Context, s *service.Service, in api.ListCatalogPointsInput) ([]api.BackupPoint, error) {
	in.Limit = 1000
	points, _, err := repoops.Ops{Service: s}.CatalogPoints(servicetest.AsLocal(ctx), &in)
	return points, err
}

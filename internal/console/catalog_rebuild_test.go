package console_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleCatalogRebuild: a point backed up with another catalog is
// not in the server's; "Rebuild the catalog's points" on the
// Repositories page recreates them from the repository's manifests and
// says how many, and the point is then listed.
func TestConsoleCatalogRebuild(t *testing.T) {
	l := newLab(t)
	img := filepath.Join(l.dir, "web.img")
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(img, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l.coffer("init")
	serverCatalog := l.vars["COFFER_CATALOG"]
	l.vars["COFFER_CATALOG"] = filepath.Join(l.dir, "elsewhere.db")
	l.coffer("backup", "disk", img, "--name", "web")
	l.vars["COFFER_CATALOG"] = serverCatalog
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/points/default")
	if n := c.count(`a[href*="/vm/web"]`); n != 0 {
		t.Fatal("the server's catalog lists the point before the rebuild")
	}
	c.open("/ui/repositories")
	c.run(chromedp.Click("#rebuild-default"))
	c.waitText("#maint-default", "The catalog holds 1 point of default now, one per manifest.")
	c.shot("catalog-rebuild")
	c.open("/ui/points/default")
	c.waitText("main", "web")
	if n := c.count(`a[href*="/vm/web"]`); n == 0 {
		t.Fatal("the rebuilt catalog does not list the point")
	}
}

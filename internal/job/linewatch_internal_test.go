package job

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// wrapped is a catalog wrapped as a process keeps its own open: the
// wrapper hides the methods outside catalog.Catalog.
type wrapped struct{ catalog.Catalog }

type unwrapping struct{ catalog.Catalog }

func (u unwrapping) Unwrap() catalog.Catalog { return u.Catalog }

// The watcher finds the catalog's watcher of lines through the wrappers
// that unwrap: a process whose catalog is wrapped still hears the lines
// its subscribers follow.
func TestLineWatcherFoundThroughWrappers(t *testing.T) {
	c, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if lineWatcherOf(c) == nil || lineWatcherOf(unwrapping{unwrapping{c}}) == nil {
		t.Fatal("the catalog's watcher of lines not found")
	}
	if lineWatcherOf(wrapped{c}) != nil {
		t.Fatal("a watcher of lines found behind a wrapper that does not unwrap")
	}
}

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// committedReference is the generated reference as committed, so that a
// change of a command, setting, exit code, document or metric shows in
// review with its documentation.
var committedReference = filepath.Join("..", "..", "docs", "reference")

// TestReferenceIsCommitted regenerates docs/reference and fails when it
// differs from the committed files (a page changed, added or gone).
// COFFER_UPDATE_DOCS=1 writes them.
func TestReferenceIsCommitted(t *testing.T) {
	const update = "COFFER_UPDATE_DOCS=1 go test ./internal/cli -run TestReferenceIsCommitted"
	if os.Getenv("COFFER_UPDATE_DOCS") == "1" {
		if _, err := GenerateDocs(committedReference); err != nil {
			t.Fatal(err)
		}
	}
	want, err := referenceFiles()
	if err != nil {
		t.Fatal(err)
	}
	var committed []string
	err = filepath.WalkDir(committedReference, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(committedReference, path)
		committed = append(committed, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatalf("%v (%s writes it)", err, update)
	}
	sort.Strings(committed)
	for _, name := range committed {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/reference/%s is committed but no longer generated", name)
		}
	}
	for name, page := range want {
		got, err := os.ReadFile(filepath.Join(committedReference, name))
		if err != nil {
			t.Errorf("docs/reference/%s is not committed: %v", name, err)
			continue
		}
		if !bytes.Equal(got, page) {
			t.Errorf("docs/reference/%s differs from what the code generates", name)
		}
	}
	if t.Failed() {
		t.Logf("review the change and regenerate the reference with %s", update)
	}
}

// TestReferenceIsDeterministic: two generations give the same files, so
// the committed copy does not churn (no dates, no map order).
func TestReferenceIsDeterministic(t *testing.T) {
	a, err := referenceFiles()
	if err != nil {
		t.Fatal(err)
	}
	b, err := referenceFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for name, page := range a {
		if !bytes.Equal(page, b[name]) {
			t.Errorf("%s differs between two generations", name)
		}
	}
}

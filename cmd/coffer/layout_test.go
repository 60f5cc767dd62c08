package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// packageLines bounds a package's size: past it, nobody holds the package
// in their head, and it is split by domain (issue 35: the service and the
// command line were).
const packageLines = 4000

// TestNoPackageAboveItsBound counts the lines of every package's Go
// files, tests left out, as `wc -l` would.
func TestNoPackageAboveItsBound(t *testing.T) {
	lines := map[string]int{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines[filepath.Dir(path)] += bytes.Count(b, []byte("\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 50 {
		t.Fatalf("only %d packages found: the walk did not start at the module's root", len(lines))
	}
	for dir, n := range lines {
		if n > packageLines {
			t.Errorf("%s has %d lines of Go, more than %d: split it by domain", strings.TrimPrefix(dir, "../../"), n, packageLines)
		}
	}
}

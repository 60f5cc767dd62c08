package all

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

// TestOpenVirtualLibrary: a virtual tape library opens with the drives
// asked (one operation at a time: a second open is refused as busy, not
// broken), drives it lacks are refused, and a directory holding none is
// not found, named as the command line gave it.
func TestOpenVirtualLibrary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vtl")
	if err := vtl.Create(dir, vtl.Config{Drives: 2, Slots: 4, Capacity: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	l := Library{Dir: dir}
	libs, closeLib, err := l.OpenDrives(2)
	if err != nil || len(libs) != 2 || libs[1].DriveIndex != 1 || l.Kind() != "vtl" || l.Ref() != dir {
		t.Fatalf("open: %v %v", libs, err)
	}
	if _, _, err := l.Open(); classOf(err) != api.Locked {
		t.Errorf("a second open of a library in use: %v", err)
	}
	if err := closeLib(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (Library{Dir: dir, Drive: 1}).OpenDrives(2); err == nil || !strings.Contains(err.Error(), "2 drives from drive 1") {
		t.Errorf("more drives than the library has: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, _, err := (Library{Dir: missing}).Open(); classOf(err) != api.NotFound ||
		!strings.Contains(err.Error(), missing) {
		t.Errorf("no library there: %v", err)
	}
}

// TestWarnings: a library object is valid wherever it is made, and the
// warnings say what this server lacks to use it.
func TestWarnings(t *testing.T) {
	if w := Warnings(map[string]any{"kind": "vtl", "directory": filepath.Join(t.TempDir(), "none")}); len(w) != 1 ||
		!strings.Contains(w[0], "no virtual tape library there") {
		t.Errorf("a missing VTL: %q", w)
	}
	dir := filepath.Join(t.TempDir(), "vtl")
	if err := vtl.Create(dir, vtl.Config{Drives: 1, Slots: 1, Capacity: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if w := Warnings(map[string]any{"kind": "vtl", "directory": dir}); len(w) != 0 {
		t.Errorf("a VTL that is there: %q", w)
	}
	w := Warnings(map[string]any{"kind": "mtx", "changer": "/dev/coffer-no-such-sg",
		"drives": []any{map[string]any{"number": 0, "device": "/dev/coffer-no-such-nst"}}})
	if !strings.Contains(strings.Join(w, "\n"), "changer: stat /dev/coffer-no-such-sg") || !strings.Contains(strings.Join(w, "\n"), "drive 0: stat /dev/coffer-no-such-nst") {
		t.Errorf("an mtx library without its devices: %q", w)
	}
}

func classOf(err error) api.Class {
	c, _ := api.ClassOf(err)
	return c
}

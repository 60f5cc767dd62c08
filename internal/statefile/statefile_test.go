package statefile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReadRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	type rec struct{ N int }
	for i := 1; i <= 2; i++ {
		if err := WriteJSON(filepath.Join(dir, "a.json"), rec{i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "torn.json"), []byte(`{"N":`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll[rec](dir)
	if err != nil || len(got) != 1 || got[0].Value.N != 2 || filepath.Base(got[0].Path) != "a.json" {
		t.Fatalf("ReadAll: %+v %v", got, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := Remove(got[0].Path); err != nil {
		t.Fatal(err)
	}
	if err := Remove(got[0].Path); err != nil {
		t.Fatalf("removing a removed file: %v", err)
	}
}

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStatFields: the CPU times are found after the command's name, which
// may hold spaces and parentheses.
func TestStatFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	line := "4242 (Chrome_Child (x) 2) S 4200 4242 4242 0 -1 4194560 1000 0 3 0 1234 56 7 8 20 0 12 0 100 1000000 500\n"
	if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	f := statFields(p)
	if f == nil || f[1] != "4200" || parseTicks(f) != 1234+56 {
		t.Fatalf("statFields: %q, ticks %d; want ppid 4200 and 1290 ticks", f, parseTicks(f))
	}
	if statFields(filepath.Join(t.TempDir(), "gone")) != nil {
		t.Fatal("a process that is gone has fields")
	}
}

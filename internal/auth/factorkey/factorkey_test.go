package factorkey

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFile(t *testing.T) {
	path := File(t.TempDir())
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	k1, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != Bytes || !bytes.Equal(k1, k2) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key %d bytes, same %v, mode %v", len(k1), bytes.Equal(k1, k2), fi.Mode())
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "5 bytes") {
		t.Fatalf("a truncated key: %v", err)
	}
}

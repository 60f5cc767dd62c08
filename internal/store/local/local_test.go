package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Create(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestShardsDataAndHidesTemp(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := store.Put(ctx, s, "data/abcdef", []byte("x"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "ab", "abcdef")); err != nil {
		t.Fatalf("pack not sharded: %v", err)
	}
	// A writer killed mid-way leaves a temp file; it must never be listed.
	w, _ := s.Create(ctx, "data/abcd99", store.PutOptions{})
	_, _ = w.Write([]byte("partial"))
	var names []string
	_ = s.List(ctx, "", func(fi store.ObjectInfo) error { names = append(names, fi.Name); return nil })
	if len(names) != 1 || names[0] != "data/abcdef" {
		t.Fatalf("listed %v", names)
	}
	_ = w.Abort()
}

func TestRejectsUnsafeNames(t *testing.T) {
	s, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"", "/abs", "a//b", "../escape", "tmp/x", ".cas-lock", "a/./b", "sp ace", "trail/"} {
		if _, err := store.Put(context.Background(), s, n, nil, store.PutOptions{}); err == nil {
			t.Errorf("name %q accepted", n)
		}
	}
}

func TestReadOnlyDirectoryIsPermissionError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	dir := t.TempDir()
	s, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Join(dir, "tmp"), 0o500)
	defer os.Chmod(filepath.Join(dir, "tmp"), 0o700)
	_, err = store.Put(context.Background(), s, "config", []byte("x"), store.PutOptions{})
	if !errors.Is(err, store.ErrPermission) {
		t.Fatalf("err = %v, want ErrPermission", err)
	}
}

func TestNoSpaceIsTranslated(t *testing.T) {
	err := translate(&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})
	if !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("ENOSPC translated to %v", err)
	}
}

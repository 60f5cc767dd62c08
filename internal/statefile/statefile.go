// Package statefile keeps coffer's small local state files (hypervisor
// journals, instant-recovery sessions) crash-safe: a file is either its
// old or its new content, never a torn mix, and a new file survives a
// power cut once WriteJSON returns.
package statefile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// WriteJSON stores v as indented JSON at path: write a temporary file,
// fsync it, rename it over path, fsync the directory.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(path, b, 0o600)
}

// WriteFile stores data at path the same way, with permissions perm (its
// directory is created private when missing).
func WriteFile(path string, b []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort after the error returned
		return err
	}
	_ = SyncDir(filepath.Dir(path)) // the rename is durable before the caller acts on it
	return nil
}

// SyncDir fsyncs a directory: a file created, renamed or removed in it
// is durable once it returns.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // opened read-only to fsync
	return d.Sync()
}

// Remove deletes path; a file already gone is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Loaded is one file read by ReadAll.
type Loaded[T any] struct {
	Path  string
	Value T
}

// ReadAll decodes every *.json file in dir. Files that cannot be read or
// decoded (a torn temporary, a foreign file) are skipped: state files are
// advisory records for cleanup, and one bad file must not hide the others.
func ReadAll[T any](dir string) ([]Loaded[T], error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Loaded[T]
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var v T
		if json.Unmarshal(b, &v) != nil {
			continue
		}
		out = append(out, Loaded[T]{Path: f, Value: v})
	}
	return out, nil
}

// ProcessAlive reports whether process pid exists on this machine: the
// state files record the coffer (or QEMU) process that owns them, and only
// a gone owner's state is someone else's to clean up.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

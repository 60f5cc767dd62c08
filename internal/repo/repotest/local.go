package repotest

import (
	"bytes"
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// Local is a repository in a directory of the test, for the tests that
// damage its files the way a disk or a careless hand does (a flipped
// byte, a file cut short or deleted) and check what verification and
// repair make of it.
type Local struct {
	Dir string // the local store's root
	R   *repo.Repository
}

// NewLocal initialises a repository like New and keeps its directory.
func NewLocal(t testing.TB, o repo.InitOptions) *Local {
	t.Helper()
	l := &Local{Dir: filepath.Join(t.TempDir(), "repo")}
	st, err := local.Create(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	o.Password, o.KDF = []byte(Password), FastKDF
	if _, err := repo.Init(context.Background(), st, o); err != nil {
		t.Fatal(err)
	}
	l.Reopen(t)
	return l
}

// Reopen opens the repository again, as the next command would: what is
// read once at open (config, keys, the index's segment list) is read anew.
func (l *Local) Reopen(t testing.TB) *repo.Repository {
	t.Helper()
	st, err := local.Open(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(context.Background(), st, []byte(Password), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.R = r
	return r
}

// Path is the file holding object name (the local store shards data/).
func (l *Local) Path(name string) string {
	if rest, ok := strings.CutPrefix(name, "data/"); ok && len(rest) > 2 && !strings.Contains(rest, "/") {
		return filepath.Join(l.Dir, "data", rest[:2], rest)
	}
	return filepath.Join(l.Dir, filepath.FromSlash(name))
}

// Read returns the bytes of object name.
func (l *Local) Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(l.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (l *Local) write(t testing.TB, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(l.Path(name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Restore writes object name back as b (saved by Read before a damage).
func (l *Local) Restore(t testing.TB, name string, b []byte) {
	t.Helper()
	l.write(t, name, b)
}

// Flip inverts the byte of object name at offset at (negative: from the
// end).
func (l *Local) Flip(t testing.TB, name string, at int) {
	t.Helper()
	b := l.Read(t, name)
	if at < 0 {
		at += len(b)
	}
	b[at] ^= 0xff
	l.write(t, name, b)
}

// Truncate cuts object name to size bytes.
func (l *Local) Truncate(t testing.TB, name string, size int64) {
	t.Helper()
	if err := os.Truncate(l.Path(name), size); err != nil {
		t.Fatal(err)
	}
}

// Remove deletes object name.
func (l *Local) Remove(t testing.TB, name string) {
	t.Helper()
	if err := os.Remove(l.Path(name)); err != nil {
		t.Fatal(err)
	}
}

// SealedTail is the offset of the middle of the sealed part that ends an
// object before its 8-byte tail (trailer length u32 | magic): a pack's
// trailer, an index segment's or a disk map's footer.
func SealedTail(raw []byte) int {
	n := int(binary.LittleEndian.Uint32(raw[len(raw)-8:]))
	return len(raw) - 8 - n/2
}

// BeforeTail is the offset of a byte of the last block before the sealed
// footer of an index segment or a disk map: it lies in the last entry
// block.
func BeforeTail(raw []byte) int {
	n := int(binary.LittleEndian.Uint32(raw[len(raw)-8:]))
	return len(raw) - 8 - n - 10
}

// Files returns every object's bytes by object file path, leaving out
// what is the local store's own (its temporary files and its lock for
// conditional writes), to compare a repository byte for byte before and
// after an operation that must change nothing.
func (l *Local) Files(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(l.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(l.Dir, p)
		if d.IsDir() {
			if rel == "tmp" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SameFiles fails the test unless before and after hold the same files
// with the same bytes.
func SameFiles(t testing.TB, what string, before, after map[string][]byte) {
	t.Helper()
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			t.Errorf("%s removed %s", what, name)
		case !bytes.Equal(a, b):
			t.Errorf("%s changed %s", what, name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s added %s", what, name)
		}
	}
}

// Package local is the store backend for a repository in a local directory
// (or any mounted filesystem with POSIX rename semantics).
//
// Atomicity comes from write-to-temp, fsync, rename, fsync-directory: the
// classic sequence that survives kill -9 and power loss on ext4/XFS. Temp
// files live in <root>/tmp so that rename never crosses filesystems.
//
// Conditional writes are evaluated under an flock(2) on <root>/.cas-lock:
// IfNotExists uses link(2) (atomic "create if absent"), IfMatch compares the
// object's version tag before the rename. Conditional writes are rare (lease
// files), so one lock for the whole store is simple and cheap.
//
// Objects under data/ are sharded into data/<first two characters>/ so that
// no directory grows past a few thousand entries.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
)

const tmpDir = "tmp"

// Store is a repository directory.
type Store struct {
	root string
	// The temp directory and the lock file are created on first write, so
	// opening a directory that is not a repository changes nothing in it.
	once    sync.Once
	initErr error
	cas     *os.File // flock'd around conditional writes and deletes
	// casMu serialises this process's goroutines: flock only excludes other
	// open file descriptions, and all goroutines share s.cas.
	casMu sync.Mutex
}

var _ store.Store = (*Store)(nil)

// Open opens the store rooted at an existing directory.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, translate(fmt.Errorf("open repository directory: %w", err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", abs)
	}
	return &Store{root: abs}, nil
}

// Create creates the directory if needed and opens it.
func Create(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, translate(fmt.Errorf("create repository directory: %w", err))
	}
	return Open(dir)
}

// prepare creates the temp directory and opens the lock file.
func (s *Store) prepare() error {
	s.once.Do(func() {
		if err := os.MkdirAll(filepath.Join(s.root, tmpDir), 0o700); err != nil {
			s.initErr = translate(fmt.Errorf("create %s: %w", tmpDir, err))
			return
		}
		s.cas, s.initErr = os.OpenFile(filepath.Join(s.root, ".cas-lock"), os.O_CREATE|os.O_RDWR, 0o600)
		s.initErr = translate(s.initErr)
	})
	return s.initErr
}

// Root returns the directory of the store.
func (s *Store) Root() string { return s.root }

// Properties implements store.Store.
func (s *Store) Properties() store.Properties {
	return store.Properties{Location: s.root, Connections: 4, ConditionalWrites: true}
}

// Close implements store.Store.
func (s *Store) Close() error {
	if s.cas != nil {
		return s.cas.Close()
	}
	return nil
}

// path maps an object name to its file, sharding data/.
func (s *Store) path(name string) (string, error) {
	if err := validName(name); err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(name, "data/"); ok && len(rest) > 2 && !strings.Contains(rest, "/") {
		return filepath.Join(s.root, "data", rest[:2], rest), nil
	}
	return filepath.Join(s.root, filepath.FromSlash(name)), nil
}

// Path is the file that holds the object name (whether it exists or not).
func (s *Store) Path(name string) (string, error) { return s.path(name) }

// nameOf is the inverse of path for files found by List.
func (s *Store) nameOf(file string) string {
	rel, _ := filepath.Rel(s.root, file)
	name := filepath.ToSlash(rel)
	if rest, ok := strings.CutPrefix(name, "data/"); ok {
		if i := strings.IndexByte(rest, '/'); i == 2 {
			return "data/" + rest[3:]
		}
	}
	return name
}

func validName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return fmt.Errorf("invalid object name %q", name)
	}
	segs := strings.Split(name, "/")
	if segs[0] == tmpDir {
		return fmt.Errorf("invalid object name %q: %s/ is reserved", name, tmpDir)
	}
	for _, seg := range segs {
		// A leading dot is refused so no name can hit .cas-lock or hidden files.
		if seg == "" || seg[0] == '.' {
			return fmt.Errorf("invalid object name %q", name)
		}
		for _, c := range seg {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
			if !ok {
				return fmt.Errorf("invalid object name %q", name)
			}
		}
	}
	return nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, name string, opts store.PutOptions) (store.ObjectWriter, error) {
	final, err := s.path(name)
	if err != nil {
		return nil, err
	}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.root, tmpDir, hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, translate(fmt.Errorf("create %s: %w", name, err))
	}
	w := &writer{s: s, ctx: ctx, name: name, final: final, tmp: tmp, f: f, opts: opts}
	if opts.SizeHint >= directBlock {
		w.direct = openDirect(f)
	}
	return w, nil
}

type writer struct {
	s         *Store
	ctx       context.Context
	name      string
	final     string
	tmp       string
	f         *os.File
	direct    *directSink // large objects: written past the page cache
	opts      store.PutOptions
	size      int64
	committed bool
	err       error
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.err = err
		return 0, err
	}
	n, err := len(p), error(nil)
	if w.direct != nil {
		err = w.direct.write(p)
	} else {
		n, err = w.f.Write(p)
	}
	w.size += int64(n)
	if err != nil {
		w.err = translate(fmt.Errorf("write %s: %w", w.name, err))
	}
	return n, w.err
}

func (w *writer) Commit() (store.ObjectInfo, error) {
	if w.committed {
		return store.ObjectInfo{}, errors.New("local: commit called twice")
	}
	if w.err != nil {
		_ = w.Abort()
		return store.ObjectInfo{}, w.err
	}
	if err := w.ctx.Err(); err != nil {
		_ = w.Abort()
		return store.ObjectInfo{}, err
	}
	if w.direct != nil {
		if err := w.direct.finish(); err != nil {
			_ = w.Abort()
			return store.ObjectInfo{}, translate(fmt.Errorf("write %s: %w", w.name, err))
		}
	}
	if err := w.f.Sync(); err != nil {
		_ = w.Abort()
		return store.ObjectInfo{}, translate(fmt.Errorf("fsync %s: %w", w.name, err))
	}
	if err := w.f.Close(); err != nil {
		_ = os.Remove(w.tmp)
		return store.ObjectInfo{}, translate(fmt.Errorf("close %s: %w", w.name, err))
	}
	if err := w.s.ensureDir(filepath.Dir(w.final)); err != nil {
		_ = os.Remove(w.tmp)
		return store.ObjectInfo{}, err
	}
	if err := w.s.install(w.tmp, w.final, w.opts); err != nil {
		_ = os.Remove(w.tmp)
		return store.ObjectInfo{}, fmt.Errorf("commit %s: %w", w.name, err)
	}
	w.committed = true
	if err := syncDir(filepath.Dir(w.final)); err != nil {
		return store.ObjectInfo{}, translate(fmt.Errorf("fsync directory of %s: %w", w.name, err))
	}
	return w.s.Stat(context.WithoutCancel(w.ctx), w.name)
}

func (w *writer) Abort() error {
	if w.committed {
		return nil
	}
	w.committed = true
	if w.direct != nil {
		w.direct.release()
	}
	_ = w.f.Close()
	if err := os.Remove(w.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// install moves tmp to final honouring the write conditions.
func (s *Store) install(tmp, final string, opts store.PutOptions) error {
	if !opts.IfNotExists && opts.IfMatch == "" {
		return translate(os.Rename(tmp, final))
	}
	unlock, err := s.lockCAS()
	if err != nil {
		return err
	}
	defer unlock()
	if opts.IfNotExists {
		// link(2) fails with EEXIST atomically, unlike a stat-then-rename.
		if err := os.Link(tmp, final); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return store.ErrExists
			}
			return translate(err)
		}
		return translate(os.Remove(tmp))
	}
	fi, err := os.Stat(final)
	if err != nil {
		return translate(err)
	}
	if version(fi) != opts.IfMatch {
		return store.ErrPreconditionFailed
	}
	return translate(os.Rename(tmp, final))
}

func (s *Store) lockCAS() (func(), error) {
	if err := s.prepare(); err != nil {
		return nil, err
	}
	s.casMu.Lock()
	if err := syscall.Flock(int(s.cas.Fd()), syscall.LOCK_EX); err != nil {
		s.casMu.Unlock()
		return nil, fmt.Errorf("lock %s: %w", s.cas.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(s.cas.Fd()), syscall.LOCK_UN)
		s.casMu.Unlock()
	}, nil
}

// ensureDir creates a shard directory and makes its entry durable.
func (s *Store) ensureDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return translate(fmt.Errorf("create directory %s: %w", dir, err))
	}
	return translate(syncDir(filepath.Dir(dir)))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // opened read-only to fsync
	return d.Sync()
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, translate(fmt.Errorf("read %s: %w", name, err))
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close() // read only
		return nil, translate(err)
	}
	if length < 0 {
		length = fi.Size() - off
	}
	if off < 0 || length < 0 || off+length > fi.Size() {
		_ = f.Close() // read only
		return nil, fmt.Errorf("read %s [%d,+%d) of %d bytes: %w", name, off, length, fi.Size(), store.ErrInvalidRange)
	}
	return &sectionFile{SectionReader: io.NewSectionReader(f, off, length), f: f}, nil
}

type sectionFile struct {
	*io.SectionReader
	f *os.File
}

func (s *sectionFile) Close() error { return s.f.Close() }

// Stat implements store.Store.
func (s *Store) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	p, err := s.path(name)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return store.ObjectInfo{}, translate(fmt.Errorf("stat %s: %w", name, err))
	}
	return info(name, fi), nil
}

func info(name string, fi fs.FileInfo) store.ObjectInfo {
	return store.ObjectInfo{Name: name, Size: fi.Size(), ModTime: fi.ModTime(), Version: version(fi)}
}

// version identifies one file's content: every committed write is a new
// inode (rename of a fresh temp file), so inode+size+mtime changes with it.
func version(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
	}
	return fmt.Sprintf("%x-%x-%x", st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
		if rest, ok := strings.CutPrefix(prefix, "data/"); ok && len(rest) >= 2 {
			start = filepath.Join(s.root, "data", rest[:2])
		}
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if p == filepath.Join(s.root, tmpDir) {
				return filepath.SkipDir
			}
			return nil
		}
		if p == filepath.Join(s.root, ".cas-lock") {
			return nil
		}
		name := s.nameOf(p)
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // deleted while listing
				return nil
			}
			return err
		}
		return fn(info(name, fi))
	})
	return translate(err)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	unlock, err := s.lockCAS()
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(p); err != nil {
		return translate(fmt.Errorf("delete %s: %w", name, err))
	}
	return nil
}

// RemoveStaleTemp deletes temp files left by writers that were killed;
// maintenance calls it with a cutoff well past any live write.
func (s *Store) RemoveStaleTemp(olderThan func(fs.FileInfo) bool) (int, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, tmpDir))
	if err != nil {
		return 0, translate(err)
	}
	n := 0
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !olderThan(fi) {
			continue
		}
		if os.Remove(filepath.Join(s.root, tmpDir, e.Name())) == nil {
			n++
		}
	}
	return n, nil
}

// translate maps OS errors to store sentinels, keeping the original text.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: %w", store.ErrNoSpace, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %w", store.ErrPermission, err)
	}
	return err
}

// RemoveLeftovers implements store.Janitor with RemoveStaleTemp.
func (s *Store) RemoveLeftovers(_ context.Context, olderThan time.Time) (int, error) {
	n, err := s.RemoveStaleTemp(func(fi fs.FileInfo) bool { return fi.ModTime().Before(olderThan) })
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil // nothing was ever written
	}
	return n, err
}

// Package cache keeps copies of a remote store's metadata objects (index
// segments, disk maps, manifests) on local disk, so that listing backups and
// planning restores do not download them again. It is a store.Store
// decorator: the repository layer does not know it is there.
//
// Correctness does not depend on the cache:
//
//   - index/ and maps/ objects are written once under unique names and never
//     rewritten (only deleted), so a cached copy is valid as long as the name
//     exists;
//   - snapshots/ manifests can be rewritten (protect, retention), so a copy
//     is only used when this process saw the object's current version in a
//     List or Stat, and is keyed by that version;
//   - everything else (packs, leases, keys, config) goes straight through.
//
// The cache is bounded by size (least recently used copies are evicted) and
// by the free space of its filesystem: it never fills the disk past
// MinFree, and stops caching rather than failing when space is short.
// Files are written to a temporary name and renamed, so a crash leaves no
// partial copy; a copy that fails to read is dropped and fetched again.
package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/store"
)

// MaxObject is the largest object copied into the cache.
const MaxObject = 64 << 20

// Options bound the cache.
type Options struct {
	MaxBytes int64 // total size of cached copies
	MinFree  int64 // free space left on the cache's filesystem
}

// Store caches metadata reads of an inner store.
type Store struct {
	store.Store
	dir  string
	opts Options

	mu      sync.Mutex
	known   map[string]store.ObjectInfo // current version and size, seen in List/Stat
	entries map[string]*entry           // file name -> entry
	total   int64
	clock   int64 // logical LRU clock

	Hits, Misses int64 // statistics for tests and benchmarks
}

type entry struct {
	size int64
	used int64
}

// New wraps inner, caching under dir (created if missing; one directory per
// repository, chosen by the caller).
func New(inner store.Store, dir string, o Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("metadata cache: %w", err)
	}
	c := &Store{Store: inner, dir: dir, opts: o, known: map[string]store.ObjectInfo{}, entries: map[string]*entry{}}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("metadata cache: %w", err)
	}
	for _, de := range des {
		fi, err := de.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if strings.HasPrefix(de.Name(), "tmp-") { // left by a crash
			_ = os.Remove(filepath.Join(dir, de.Name()))
			continue
		}
		// Older files count as less recently used.
		c.entries[de.Name()] = &entry{size: fi.Size(), used: fi.ModTime().UnixNano() - time.Now().UnixNano()}
		c.total += fi.Size()
	}
	c.evict(0)
	return c, nil
}

// Unwrap returns the inner store.
func (c *Store) Unwrap() store.Store { return c.Store }

func immutable(name string) bool {
	return strings.HasPrefix(name, "index/") || strings.HasPrefix(name, "maps/")
}

func cacheable(name string) bool { return immutable(name) || strings.HasPrefix(name, "snapshots/") }

// file names the cached copy of name at version ("" for immutable names).
func file(name, version string) string {
	h := sha256.Sum256([]byte(name + "\x00" + version))
	return hex.EncodeToString(h[:20])
}

// Read implements store.Store.
func (c *Store) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	if !cacheable(name) {
		return c.Store.Read(ctx, name, off, length)
	}
	c.mu.Lock()
	info, ok := c.known[name]
	c.mu.Unlock()
	switch {
	case !ok && !immutable(name):
		// A manifest whose current version this process has not seen.
		return c.Store.Read(ctx, name, off, length)
	case ok && info.Size > MaxObject:
		return c.Store.Read(ctx, name, off, length)
	}
	version := ""
	if !immutable(name) {
		version = info.Version
	}
	fn := file(name, version)
	if b, ok := c.hit(fn); ok {
		return section(b, name, off, length)
	}
	c.mu.Lock()
	c.Misses++
	c.mu.Unlock()
	if !ok {
		// Learn the size first: a large object is only read in ranges and
		// must not be downloaded whole.
		fi, err := c.Stat(ctx, name)
		if err != nil {
			return nil, err
		}
		if fi.Size > MaxObject {
			return c.Store.Read(ctx, name, off, length)
		}
	}
	b, err := store.Get(ctx, c.Store, name, 0, -1)
	if err != nil {
		return nil, err
	}
	c.put(fn, b)
	return section(b, name, off, length)
}

func section(b []byte, name string, off, length int64) (io.ReadCloser, error) {
	size := int64(len(b))
	if length < 0 {
		length = size - off
	}
	if off < 0 || length < 0 || off+length > size {
		return nil, fmt.Errorf("read %s [%d,+%d) of %d bytes: %w", name, off, length, size, store.ErrInvalidRange)
	}
	return io.NopCloser(bytes.NewReader(b[off : off+length])), nil
}

// hit returns a cached copy.
func (c *Store) hit(fn string) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.entries[fn]
	if ok {
		c.clock++
		e.used = c.clock
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(c.dir, fn))
	if err != nil || int64(len(b)) != e.size {
		c.drop(fn)
		return nil, false
	}
	c.mu.Lock()
	c.Hits++
	c.mu.Unlock()
	return b, true
}

// put stores a copy if it fits within both bounds; failures only mean the
// object is not cached.
func (c *Store) put(fn string, b []byte) {
	size := int64(len(b))
	if size > MaxObject || size > c.opts.MaxBytes {
		return
	}
	c.evict(size)
	if free, err := freeSpace(c.dir); err != nil || free-size < c.opts.MinFree {
		return
	}
	tmp, err := os.CreateTemp(c.dir, "tmp-")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(c.dir, fn)) != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[fn]; ok {
		c.total -= old.size
	}
	c.clock++
	c.entries[fn] = &entry{size: size, used: c.clock}
	c.total += size
}

// evict removes least recently used copies until room more bytes fit
// within MaxBytes and the filesystem keeps MinFree.
func (c *Store) evict(room int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.entries) > 0 {
		free, err := freeSpace(c.dir)
		if c.total+room <= c.opts.MaxBytes && err == nil && free-room >= c.opts.MinFree {
			return
		}
		oldest, at := "", int64(0)
		for fn, e := range c.entries {
			if oldest == "" || e.used < at {
				oldest, at = fn, e.used
			}
		}
		_ = os.Remove(filepath.Join(c.dir, oldest))
		c.total -= c.entries[oldest].size
		delete(c.entries, oldest)
	}
}

func (c *Store) drop(fn string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[fn]; ok {
		_ = os.Remove(filepath.Join(c.dir, fn))
		c.total -= e.size
		delete(c.entries, fn)
	}
}

func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// List implements store.Store, remembering the versions it sees.
func (c *Store) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	return c.Store.List(ctx, prefix, func(fi store.ObjectInfo) error {
		c.learn(fi)
		return fn(fi)
	})
}

// Stat implements store.Store, remembering the version it sees.
func (c *Store) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	fi, err := c.Store.Stat(ctx, name)
	if err == nil {
		c.learn(fi)
	}
	return fi, err
}

func (c *Store) learn(fi store.ObjectInfo) {
	if cacheable(fi.Name) {
		c.mu.Lock()
		c.known[fi.Name] = fi
		c.mu.Unlock()
	}
}

// Create implements store.Store; a rewrite makes the known version stale.
func (c *Store) Create(ctx context.Context, name string, opts store.PutOptions) (store.ObjectWriter, error) {
	c.forget(name)
	return c.Store.Create(ctx, name, opts)
}

// Delete implements store.Store and drops the cached copy.
func (c *Store) Delete(ctx context.Context, name string) error {
	c.forget(name)
	if immutable(name) {
		c.drop(file(name, ""))
	}
	return c.Store.Delete(ctx, name)
}

func (c *Store) forget(name string) {
	c.mu.Lock()
	delete(c.known, name)
	c.mu.Unlock()
}

// ExtendRetention forwards to the inner store, so wrapping keeps the
// store.Retainer capability.
func (c *Store) ExtendRetention(ctx context.Context, name string, until time.Time) error {
	if r, ok := c.Store.(store.Retainer); ok {
		return r.ExtendRetention(ctx, name, until)
	}
	return nil
}

// RemoveLeftovers forwards to the inner store (store.Janitor).
func (c *Store) RemoveLeftovers(ctx context.Context, olderThan time.Time) (int, error) {
	if j, ok := c.Store.(store.Janitor); ok {
		return j.RemoveLeftovers(ctx, olderThan)
	}
	return 0, nil
}

// Versions, ExtendVersionRetention and DeleteVersion forward to the inner
// store (store.Versioned); a store without versions has none to list.
func (c *Store) Versions(ctx context.Context, prefix string, fn func(string, []store.Version) error) error {
	if v, ok := c.Store.(store.Versioned); ok {
		return v.Versions(ctx, prefix, fn)
	}
	return nil
}

// ExtendVersionRetention forwards to the inner store (store.Versioned).
func (c *Store) ExtendVersionRetention(ctx context.Context, v store.Version, until time.Time) error {
	if vs, ok := c.Store.(store.Versioned); ok {
		return vs.ExtendVersionRetention(ctx, v, until)
	}
	return nil
}

// DeleteVersion forwards to the inner store (store.Versioned) and drops
// the cached copy, which may be of that version.
func (c *Store) DeleteVersion(ctx context.Context, v store.Version) error {
	c.forget(v.Name)
	if immutable(v.Name) {
		c.drop(file(v.Name, ""))
	}
	if vs, ok := c.Store.(store.Versioned); ok {
		return vs.DeleteVersion(ctx, v)
	}
	return store.ErrNotFound
}

package reposerver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/statefile"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// Immutable is a local store whose objects written with a retention are
// made immutable on the file system (FS_IMMUTABLE_FL, on ext4 and XFS)
// until it lapses: neither a client, whatever its right, nor another
// process of the service's user can delete or change them. The lock's
// end is recorded beside each object, in a tree of its own next to the
// repository (DIR.retention/NAME), written before the object is
// committed and itself made immutable: a crash between the two leaves a
// record, which Reapply turns back into the flag at the next start.
// Setting and clearing the flag needs CAP_LINUX_IMMUTABLE, the one
// capability the server runs with.
type Immutable struct {
	*local.Store
	records string // DIR.retention
	now     func() time.Time
}

// NewImmutable wraps st. It probes the file system: one that cannot keep
// the flag (or a process without the capability) is an error, so that a
// repository is never believed immutable when it is not.
func NewImmutable(st *local.Store) (*Immutable, error) {
	im := &Immutable{Store: st, records: st.Root() + ".retention", now: time.Now}
	if err := os.MkdirAll(im.records, 0o700); err != nil {
		return nil, fmt.Errorf("retention records: %w", err)
	}
	probe := filepath.Join(im.records, ".probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return nil, fmt.Errorf("retention records: %w", err)
	}
	err := setImmutable(probe, true)
	_ = setImmutable(probe, false)
	_ = os.Remove(probe)
	if err != nil {
		return nil, fmt.Errorf("%s cannot make files immutable (FS_IMMUTABLE_FL needs ext4 or XFS, and CAP_LINUX_IMMUTABLE): %w", st.Root(), err)
	}
	return im, nil
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h, which x/sys/unix does
// not define.
const fsImmutableFL = 0x00000010

// setImmutable sets or clears FS_IMMUTABLE_FL on a file.
func setImmutable(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // opened for an ioctl only: nothing to flush
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return fmt.Errorf("get flags of %s: %w", path, err)
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		return fmt.Errorf("set flags of %s: %w", path, err)
	}
	return nil
}

func (im *Immutable) recordPath(name string) string {
	return filepath.Join(im.records, filepath.FromSlash(name))
}

// lockOf is the recorded lock of name (zero when none).
func (im *Immutable) lockOf(name string) (time.Time, error) {
	raw, err := os.ReadFile(im.recordPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	} else if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(raw)))
	if err != nil {
		return time.Time{}, fmt.Errorf("retention record of %s: %w", name, err)
	}
	return t, nil
}

// locked refuses a change of name while its lock holds.
func (im *Immutable) locked(name string) error {
	if _, err := im.Store.Stat(context.Background(), name); errors.Is(err, store.ErrNotFound) {
		return nil // a record without its object: a write that never committed
	}
	until, err := im.lockOf(name)
	if err != nil {
		return err
	}
	if until.After(im.now()) {
		return fmt.Errorf("%s is locked until %s: %w", name, until.UTC().Format(time.RFC3339), store.ErrRetained)
	}
	return nil
}

// record writes name's lock end, replacing a shorter one.
func (im *Immutable) record(name string, until time.Time) error {
	p := im.recordPath(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(p); err == nil {
		if err := setImmutable(p, false); err != nil {
			return err
		}
	}
	if err := statefile.WriteFile(p, []byte(until.UTC().Format(time.RFC3339Nano)+"\n"), 0o600); err != nil {
		return err
	}
	return setImmutable(p, true)
}

// Properties implements store.Store: retention is enforced.
func (im *Immutable) Properties() store.Properties {
	p := im.Store.Properties()
	p.Retention = true
	return p
}

// Create implements store.Store: a locked object is not replaced; a
// retained write records its lock first and is made immutable once
// committed.
func (im *Immutable) Create(ctx context.Context, name string, opts store.PutOptions) (store.ObjectWriter, error) {
	if err := im.locked(name); err != nil {
		return nil, err
	}
	if err := im.unlockLapsed(name); err != nil {
		return nil, err
	}
	w, err := im.Store.Create(ctx, name, opts)
	if err != nil || opts.RetainUntil.IsZero() {
		return w, err
	}
	if err := im.record(name, opts.RetainUntil); err != nil {
		_ = w.Abort()
		return nil, fmt.Errorf("record the lock of %s: %w", name, err)
	}
	return &lockingWriter{ObjectWriter: w, im: im, name: name, until: opts.RetainUntil}, nil
}

type lockingWriter struct {
	store.ObjectWriter
	im    *Immutable
	name  string
	until time.Time
}

func (w *lockingWriter) Commit() (store.ObjectInfo, error) {
	fi, err := w.ObjectWriter.Commit()
	if err != nil {
		return fi, err
	}
	if err := w.im.flag(w.name, true); err != nil {
		return fi, fmt.Errorf("lock %s: %w", w.name, err)
	}
	fi.RetainUntil = w.until.UTC()
	return fi, nil
}

func (im *Immutable) flag(name string, on bool) error {
	p, err := im.Path(name)
	if err != nil {
		return err
	}
	return setImmutable(p, on)
}

// ExtendRetention implements store.Retainer: a lock is only extended.
func (im *Immutable) ExtendRetention(ctx context.Context, name string, until time.Time) error {
	if _, err := im.Store.Stat(ctx, name); err != nil {
		return err
	}
	cur, err := im.lockOf(name)
	if err != nil {
		return err
	}
	if !until.After(cur) {
		return nil
	}
	if err := im.record(name, until); err != nil {
		return err
	}
	return im.flag(name, true)
}

// unlockLapsed clears the flag of an object whose lock has lapsed (the
// caller checked it), so that it can be replaced or deleted.
func (im *Immutable) unlockLapsed(name string) error {
	if until, err := im.lockOf(name); err != nil || until.IsZero() {
		return err
	}
	if err := im.flag(name, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Delete implements store.Store: refused while the lock holds; after it,
// the flag is cleared and the record removed with the object.
func (im *Immutable) Delete(ctx context.Context, name string) error {
	if err := im.locked(name); err != nil {
		return err
	}
	if err := im.unlockLapsed(name); err != nil {
		return err
	}
	if err := im.Store.Delete(ctx, name); err != nil {
		return err
	}
	return im.dropRecord(name)
}

func (im *Immutable) dropRecord(name string) error {
	p := im.recordPath(name)
	if err := setImmutable(p, false); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	return os.Remove(p)
}

// Stat implements store.Store, with the recorded lock.
func (im *Immutable) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	fi, err := im.Store.Stat(ctx, name)
	if err != nil {
		return fi, err
	}
	fi.RetainUntil, err = im.lockOf(name)
	return fi, err
}

// List implements store.Store, with the recorded locks.
func (im *Immutable) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	return im.Store.List(ctx, prefix, func(fi store.ObjectInfo) error {
		until, err := im.lockOf(fi.Name)
		if err != nil {
			return err
		}
		fi.RetainUntil = until
		return fn(fi)
	})
}

// Reapply makes every object whose lock holds immutable again: after a
// crash between a retained write's commit and its flag. It returns how
// many it flagged.
func (im *Immutable) Reapply(ctx context.Context) (int, error) {
	n := 0
	err := filepath.WalkDir(im.records, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rel, _ := filepath.Rel(im.records, p)
		name := filepath.ToSlash(rel)
		until, err := im.lockOf(name)
		if err != nil || !until.After(im.now()) {
			return err
		}
		if err := im.flag(name, true); errors.Is(err, fs.ErrNotExist) {
			return nil // the write never committed
		} else if err != nil {
			return err
		}
		n++
		return ctx.Err()
	})
	return n, err
}

// ClearImmutable clears the flag of every file under a repository and
// its retention records, for tests whose temporary directories must be
// removed afterwards (and for an operator decommissioning a repository
// whose locks have all lapsed).
func ClearImmutable(t interface{ Logf(string, ...any) }, root string) {
	for _, dir := range []string{root, root + ".retention"} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if err := setImmutable(p, false); err != nil {
					t.Logf("clear the immutable flag of %s: %v", p, err)
				}
			}
			return nil
		})
	}
}

// IsImmutable reports whether a file has FS_IMMUTABLE_FL (for tests and
// checks).
func IsImmutable(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }() // opened for an ioctl only: nothing to flush
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	return err == nil && flags&fsImmutableFL != 0, err
}

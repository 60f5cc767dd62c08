package storetest

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
)

// CrashAt wraps a store so that this process kills itself with SIGKILL at
// its n-th mutation (a committed write or a delete, counted from 1): before
// the mutation reaches the store, or right after it completed when after is
// true. Crash tests run a command in a child process with every n in turn,
// so every step of it is interrupted once, deterministically, where a kill
// after a random delay only lands where the command spends its time.
func CrashAt(inner store.Store, n int, after bool) store.Store {
	return &crashing{Store: inner, at: n, after: after}
}

type crashing struct {
	store.Store
	mu    sync.Mutex
	count int
	at    int
	after bool
}

// step counts one mutation; do performs it.
func (c *crashing) step(do func() error) error {
	c.mu.Lock()
	c.count++
	hit := c.count == c.at
	if hit && !c.after {
		die()
	}
	c.mu.Unlock()
	err := do()
	if hit {
		die()
	}
	return err
}

func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is delivered asynchronously
}

func (c *crashing) Create(ctx context.Context, name string, opts store.PutOptions) (store.ObjectWriter, error) {
	w, err := c.Store.Create(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return &crashingWriter{ObjectWriter: w, c: c}, nil
}

func (c *crashing) Delete(ctx context.Context, name string) error {
	return c.step(func() error { return c.Store.Delete(ctx, name) })
}

type crashingWriter struct {
	store.ObjectWriter
	c *crashing
}

func (w *crashingWriter) Commit() (store.ObjectInfo, error) {
	var fi store.ObjectInfo
	err := w.c.step(func() (err error) {
		fi, err = w.ObjectWriter.Commit()
		return err
	})
	return fi, err
}

// ExtendRetention keeps the store.Retainer capability and counts as a
// mutation.
func (c *crashing) ExtendRetention(ctx context.Context, name string, until time.Time) error {
	r, ok := c.Store.(store.Retainer)
	if !ok {
		return nil
	}
	return c.step(func() error { return r.ExtendRetention(ctx, name, until) })
}

// RemoveLeftovers keeps the store.Janitor capability (not counted: it only
// removes what no reader can see).
func (c *crashing) RemoveLeftovers(ctx context.Context, olderThan time.Time) (int, error) {
	if j, ok := c.Store.(store.Janitor); ok {
		return j.RemoveLeftovers(ctx, olderThan)
	}
	return 0, nil
}

// Unwrap exposes the wrapped store (store.Innermost).
func (c *crashing) Unwrap() store.Store { return c.Store }

// CopyFrom keeps the copy capability of the store under it (a clone, an
// S3 server-side copy) and counts the copy as a mutation.
func (c *crashing) CopyFrom(ctx context.Context, from store.Store, fromName, name string, opts store.PutOptions) (store.ObjectInfo, store.CopyMethod, error) {
	type copier interface {
		CopyFrom(ctx context.Context, from store.Store, fromName, name string, opts store.PutOptions) (store.ObjectInfo, store.CopyMethod, error)
	}
	inner := c.Store
	for {
		if cp, ok := inner.(copier); ok {
			var fi store.ObjectInfo
			var m store.CopyMethod
			err := c.step(func() (err error) {
				fi, m, err = cp.CopyFrom(ctx, from, fromName, name, opts)
				return err
			})
			return fi, m, err
		}
		u, ok := inner.(interface{ Unwrap() store.Store })
		if !ok {
			return store.ObjectInfo{}, "", errors.ErrUnsupported
		}
		inner = u.Unwrap()
	}
}

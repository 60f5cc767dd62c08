package repo

import (
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/store"
)

// Clone makes st, an empty store, the same repository as r with nothing
// in it yet: r's config and every key file are copied byte for byte, so
// r's passwords open it and its chunk IDs are r's, and a copy into it
// (transfer.Copy) moves chunks without re-encrypting them. Copies to
// media build one per backup point: a repository holding that point
// alone, which restores without r.
func (r *Repository) Clone(ctx context.Context, st store.Store) (*Repository, error) {
	if _, err := st.Stat(ctx, configName); err == nil {
		return nil, fmt.Errorf("%w at %s", ErrAlreadyExists, st.Properties().Location)
	}
	var names []string
	for _, prefix := range []string{keysPrefix, configName} { // the config last, as init writes it
		err := r.st.List(ctx, prefix, func(fi store.ObjectInfo) error {
			if prefix == configName && fi.Name != configName {
				return nil
			}
			names = append(names, fi.Name)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, name := range names {
		raw, err := store.Get(ctx, r.st, name, 0, -1)
		if errors.Is(err, store.ErrNotFound) && name != configName {
			continue // a key removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("clone %s: %w", name, err)
		}
		if _, err := store.Put(ctx, st, name, raw, store.PutOptions{}); err != nil {
			return nil, fmt.Errorf("clone %s: %w", name, err)
		}
	}
	c := &Repository{st: st, cfg: r.cfg, key: r.key, keyID: r.keyID, unlocked: r.unlocked, log: r.log, hostname: r.hostname, opts: r.opts}
	if err := c.ReloadIndex(ctx); err != nil {
		return nil, err
	}
	if err := c.loadDamage(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

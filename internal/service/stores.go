package service

import (
	"context"

	"github.com/coffer-backup/coffer/internal/store"
	storeall "github.com/coffer-backup/coffer/internal/store/all"
)

// OpenStore opens the storage at a repository location through the
// registry of storage backends (internal/store/all), wrapped as the
// configuration asks.
func (s *Service) OpenStore(ctx context.Context, location string) (store.Store, error) {
	st, err := storeall.Open(ctx, s.Config.Stores, location, s.log)
	if err != nil {
		return nil, err
	}
	if s.Config.WrapStore != nil {
		st = s.Config.WrapStore(st)
	}
	return st, nil
}

package service

import (
	"github.com/coffer-backup/coffer/internal/api"
)

// Supersede marks this process as superseded: a newer coffer migrated the
// catalog it shares (a rolling upgrade, docs/upgrading.md). From then on
// the server refuses the requests that would change something, with the
// class unsupported-version; what runs already finishes.
func (s *Service) Supersede(applied, known int) {
	err := api.Errorf(api.UnsupportedVersion, "this server's coffer is older than the catalog it shares (schema %d, it knows %d): "+
		"it takes no new work; send the request to a server of the newer version, and upgrade this one", applied, known)
	s.superseded.Store(&err)
}

// Superseded is why this process takes no new work (nil: it does).
func (s *Service) Superseded() error {
	if p := s.superseded.Load(); p != nil {
		return *p
	}
	return nil
}

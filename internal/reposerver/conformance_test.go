package reposerver_test

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/reposerver"
	"github.com/coffer-backup/coffer/internal/reposerver/reposervertest"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/storetest"
)

// TestConformance: the store contract holds through a real repository
// server over TLS (internal/store/remote), with a maintain credential.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, reposervertest.Start(t, reposerver.DefaultOptions), reposerver.Maintain)
	})
}

package workerops

import (
	"context"
	"errors"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet"
)

// CreateWorkerToken makes the worker's own credential: a PostgreSQL login
// role of the catalog's database, coffer_worker_<name>, whose password is
// the token's secret, and which holds only the workers' grants
// (docs/design/fleet.md, "Worker credentials"). A worker with a token
// re-keys its role: the old token stops working. The token is returned
// this once; the database keeps only the password's SCRAM verifier.
func (s Ops) CreateWorkerToken(ctx context.Context, in *api.CreateWorkerTokenInput) (api.NewWorkerToken, error) {
	token, secret, err := fleet.NewToken(in.Worker)
	if err != nil {
		return api.NewWorkerToken{}, api.WithClass(api.Invalid, err)
	}
	creds, closeCat, err := s.credentials(ctx)
	if err != nil {
		return api.NewWorkerToken{}, err
	}
	defer closeCat()
	if err := creds.SetWorkerCredential(ctx, in.Worker, secret); err != nil {
		return api.NewWorkerToken{}, credentialError(err)
	}
	return api.NewWorkerToken{Worker: in.Worker, Role: catalog.WorkerRole(in.Worker), Token: token}, nil
}

// RevokeWorkerToken revokes the worker's credential at once: its role may
// no longer log in and loses the workers' grants (a session still open
// can do nothing more), its sessions are ended, and its heartbeat is
// expired so that the servers' watch declares it lost at its next look
// and the dispatcher re-admits its running units.
func (s Ops) RevokeWorkerToken(ctx context.Context, in *api.RevokeWorkerTokenInput) (api.WorkerTokenRevoked, error) {
	creds, closeCat, err := s.credentials(ctx)
	if err != nil {
		return api.WorkerTokenRevoked{}, err
	}
	defer closeCat()
	r, err := creds.RevokeWorkerCredential(ctx, in.Worker)
	if err != nil {
		return api.WorkerTokenRevoked{}, credentialError(err)
	}
	s.Logger().Info("worker token revoked", "worker", in.Worker, "sessions", r.Sessions, "expired", r.Expired)
	return api.WorkerTokenRevoked{Worker: in.Worker, Sessions: r.Sessions, Expired: r.Expired}, nil
}

// credentials opens the catalog's worker credentials.
func (s Ops) credentials(ctx context.Context) (catalog.WorkerCredentials, func(), error) {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, nil, err
	}
	creds, ok := catalog.WorkerCredentialsOf(c)
	if !ok {
		_ = c.Close()
		return nil, nil, credentialError(catalog.ErrNeedsPostgres)
	}
	return creds, func() { _ = c.Close() }, nil
}

// credentialError classes the catalog's refusals for the faces.
func credentialError(err error) error {
	switch {
	case errors.Is(err, catalog.ErrNeedsPostgres):
		return api.Errorf(api.Invalid, "workers need a PostgreSQL catalog (--catalog postgres://...): a SQLite catalog runs its work in the server's process")
	case errors.Is(err, catalog.ErrNotFound):
		return api.WithClass(api.NotFound, err)
	}
	return err
}

// credentialStates is the state of each worker's credential: none for all
// on a catalog that has none (SQLite).
func credentialStates(ctx context.Context, c catalog.Catalog) (map[string]catalog.CredentialState, error) {
	creds, ok := catalog.WorkerCredentialsOf(c)
	if !ok {
		return nil, nil
	}
	states, err := creds.WorkerCredentials(ctx)
	if errors.Is(err, catalog.ErrNeedsPostgres) {
		return nil, nil
	}
	return states, err
}

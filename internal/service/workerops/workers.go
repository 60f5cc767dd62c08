package workerops

import (
	"context"
	"errors"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// Workers lists the fleet's workers by name.
func (s Ops) Workers(ctx context.Context, _ *api.ListWorkersInput) ([]api.Worker, error) {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ws, err := c.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	creds, err := credentialStates(ctx, c)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]api.Worker, 0, len(ws))
	for _, w := range ws {
		doc := WorkerDoc(w, now)
		if st, ok := creds[w.Name]; ok {
			doc.Credential = string(st)
		}
		out = append(out, doc)
	}
	return out, nil
}

// DrainWorker marks a worker draining in the registry: the dispatcher
// grants it nothing more, and the worker sees it with its next heartbeat,
// lets its running work finish and deregisters.
func (s Ops) DrainWorker(ctx context.Context, in *api.DrainWorkerInput) (api.Worker, error) {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return api.Worker{}, err
	}
	defer c.Close()
	w, err := c.SetWorkerState(ctx, in.Worker, 0, catalog.WorkerDraining)
	if errors.Is(err, catalog.ErrFenced) {
		return api.Worker{}, api.Errorf(api.Conflict, "worker %s was declared lost: it runs nothing to drain", in.Worker)
	}
	if err != nil {
		return api.Worker{}, err
	}
	return WorkerDoc(w, time.Now()), nil
}

// WorkerDoc is a registry row as a document; its age is now's.
func WorkerDoc(w catalog.Worker, now time.Time) api.Worker {
	return api.Worker{Name: w.Name, Host: w.Host, State: string(w.State), Slots: w.Slots, Version: w.Version,
		Protocol: w.Protocol, Epoch: w.Epoch, LastHeartbeat: w.HeartbeatAt, RegisteredAt: w.RegisteredAt,
		AgeSeconds: max(0, now.Sub(w.HeartbeatAt).Seconds()),
		Reach: api.WorkerReach{Connections: list(w.Reach.Connections), Hosts: list(w.Reach.Hosts),
			Datastores: list(w.Reach.Datastores), Libraries: list(w.Reach.Libraries),
			Repositories: list(w.Reach.Repositories), CanBoot: w.Reach.CanBoot},
		Credential: string(catalog.CredentialNone)}
}

// list is a document's list: [] when empty, never null.
func list(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

package api

// The inputs of the operations on the fleet's workers (see inputs.go).

// ListWorkersInput lists the fleet's workers.
type ListWorkersInput struct{}

// DrainWorkerInput asks a worker to take no new work and stop once its
// running work has finished.
type DrainWorkerInput struct {
	Worker string `path:"worker" maxLength:"56" pattern:"^[a-z0-9]+([_-]?[a-z0-9]+)*$" example:"kvm1" doc:"the worker's name"`
}

// CreateWorkerTokenInput makes a worker's own credential to the catalog,
// or a new one replacing the one it had.
type CreateWorkerTokenInput struct {
	Worker string `path:"worker" maxLength:"49" pattern:"^[a-z0-9]+([_-]?[a-z0-9]+)*$" example:"kvm1" doc:"the worker's name (at most 49 characters: its PostgreSQL role is coffer_worker_<name>)"`
}

// RevokeWorkerTokenInput revokes a worker's credential: it can no longer
// reach the catalog, and its running units are re-admitted.
type RevokeWorkerTokenInput struct {
	Worker string `path:"worker" maxLength:"56" pattern:"^[a-z0-9]+([_-]?[a-z0-9]+)*$" example:"kvm1" doc:"the worker's name"`
}

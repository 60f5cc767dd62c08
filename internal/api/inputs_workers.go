package api

// The inputs of the operations on the fleet's workers (see inputs.go).

// ListWorkersInput lists the fleet's workers.
type ListWorkersInput struct{}

// DrainWorkerInput asks a worker to take no new work and stop once its
// running work has finished.
type DrainWorkerInput struct {
	Worker string `path:"worker" maxLength:"56" pattern:"^[a-z0-9]+([_-]?[a-z0-9]+)*$" example:"kvm1" doc:"the worker's name"`
}

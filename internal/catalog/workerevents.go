package catalog

import "context"

// WorkerEvents is the fenced write of a worker's attempt: every catalog
// write a worker makes for a unit carries its registration (issue 36: a
// stale epoch is refused), so that a worker cut off, declared lost and
// replaced cannot write into a job's log once its unit was re-admitted.
type WorkerEvents interface {
	// AddWorkerEvents records events as AddEvents does, in one
	// transaction with a check that worker name is still registered with
	// epoch and not lost; otherwise it records nothing and returns an
	// error wrapping ErrFenced. The check takes the worker's row lock,
	// so it is ordered with DeclareWorkersLost and a new registration:
	// the events land before the worker is declared lost, or not at all.
	AddWorkerEvents(ctx context.Context, name string, epoch int64, events []Event) error
	// SetWorkerTaskProgress records how far the running attempt of task
	// taskID on worker name got, disk bytes covered, bytes read from
	// the hypervisor and stored in the repository so far (the task's
	// BytesLogical, BytesRead and BytesStored until its end records the
	// point's: the leader reads them into its job's progress), fenced as
	// AddWorkerEvents is. A task no longer running is left as it is: a
	// late sample never overwrites the end the leader recorded.
	SetWorkerTaskProgress(ctx context.Context, name string, epoch int64, taskID int64, covered, read, stored int64) error
}

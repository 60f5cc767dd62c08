// Package workergrants is what the PostgreSQL role of a fleet's worker
// may reach in the catalog: the group role's grants and the row policies
// that confine a worker to its own registry row and its own queue
// (docs/design/fleet.md, "Worker credentials"). sqlcat states them.
package workergrants

// Grants are the group role's grants, stated again at every
// credential created (a newer schema may have added what they name). Each
// is what a worker's code path uses (docs/design/fleet.md, "Worker
// credentials"); %[1]s is the catalog's schema, %[2]s the queue's.
var Grants = []string{
	// The catalog's schema version, checked instead of migrated.
	`GRANT USAGE ON SCHEMA %[1]s TO coffer_worker`,
	`GRANT SELECT ON schema_migrations TO coffer_worker`,
	// The configuration in effect (objects hold no secret: specs name
	// files, which the worker reads on its own host).
	`GRANT SELECT ON config_objects, config_generation TO coffer_worker`,
	// The schedules lease's epoch: a unit granted under an earlier
	// holding (a stale leader's) is refused (fleet.LeaderFence).
	`GRANT SELECT ON leases TO coffer_worker`,
	// Its own registry row (the policies below).
	`GRANT SELECT, INSERT, UPDATE, DELETE ON workers TO coffer_worker`,
	// The job's log: an event, and the job's line count it bumps.
	`GRANT INSERT ON events TO coffer_worker`,
	`GRANT SELECT (id, log_lines), UPDATE (log_lines) ON jobs TO coffer_worker`,
	// A running unit's progress (SetWorkerTaskProgress).
	`GRANT SELECT (id, status), UPDATE (bytes_logical, bytes_read, bytes_stored) ON tasks TO coffer_worker`,
	// A unit's end, committed with its River job's completion
	// (postgres.EndWorkerUnitTx): the task's end, only of the attempt that
	// ran, and its new point (inserted, never read or changed).
	`GRANT SELECT (job_id, attempts), UPDATE (status, finished_at, error, backup_point_id, mode, warnings, snapshot_mode_achieved) ON tasks TO coffer_worker`,
	`GRANT INSERT ON backup_points TO coffer_worker`,
	// The queue: River's tables, now and those a later River adds.
	`CREATE SCHEMA IF NOT EXISTS %[2]s`,
	`GRANT USAGE ON SCHEMA %[2]s TO coffer_worker`,
	`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %[2]s TO coffer_worker`,
	`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %[2]s TO coffer_worker`,
	`ALTER DEFAULT PRIVILEGES IN SCHEMA %[2]s GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO coffer_worker`,
	`ALTER DEFAULT PRIVILEGES IN SCHEMA %[2]s GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO coffer_worker`,
	// Row-level security on the registry: a worker sees and changes its
	// own row only; every other role (the servers, which may not own the
	// table) sees them all. The owner bypasses it anyway.
	`ALTER TABLE workers ENABLE ROW LEVEL SECURITY`,
}

// RegistryPolicies are the registry's row policies, created once.
var RegistryPolicies = map[string]string{
	"coffer_worker_own_row": `CREATE POLICY coffer_worker_own_row ON workers TO coffer_worker
		USING (current_user = 'coffer_worker_' || name) WITH CHECK (current_user = 'coffer_worker_' || name)`,
	"coffer_not_worker": `CREATE POLICY coffer_not_worker ON workers
		USING (NOT pg_has_role(current_user, 'coffer_worker', 'USAGE'))
		WITH CHECK (NOT pg_has_role(current_user, 'coffer_worker', 'USAGE'))`,
}

// QueuePolicies confine a worker's role to its own queue's jobs in
// River's table (%[1]s is the queue's schema): River has no privilege per
// queue, and a role that could insert into the servers' queue would have
// a server run any operation, or into another worker's, that worker
// run its units. A worker's queue is "w-<name>" and its role
// "coffer_worker_<name>" (14 characters before the name).
var QueuePolicies = map[string]string{
	"coffer_worker_own_queue": `CREATE POLICY coffer_worker_own_queue ON %[1]s.river_job TO coffer_worker
		USING (queue = 'w-' || substr(current_user, 15)) WITH CHECK (queue = 'w-' || substr(current_user, 15))`,
	"coffer_not_worker": `CREATE POLICY coffer_not_worker ON %[1]s.river_job
		USING (NOT pg_has_role(current_user, 'coffer_worker', 'USAGE'))
		WITH CHECK (NOT pg_has_role(current_user, 'coffer_worker', 'USAGE'))`,
}

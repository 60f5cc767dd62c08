// Package registrystate tells whether a worker registration is dead, for
// a process that may read only its own row of the registry: a worker's
// role (row-level security, workergrants.RegistryPolicies).
//
// A worker needs this about another registration when it finds that
// one's coffer snapshot on a VM (fleet.OwnerGone): removing the snapshot
// of a live worker would break that worker's backup. Of the ways to let it
// know, this is the least privilege:
//   - a function, SECURITY DEFINER, answering one bit for a registration
//     the caller names (this package). It cannot list the fleet's names,
//     hosts, reach or heartbeats, nor change anything;
//   - a view of every row's name and state would let a stolen worker
//     token list the fleet;
//   - the leader passing the lost registrations in each unit needs no
//     privilege, but goes stale between the grant and the snapshot (a
//     worker lost meanwhile blocks the VM until another grant), and the
//     leader cannot know which owner a VM's snapshot names, so it would
//     pass every lost registration in every unit.
package registrystate

import (
	"context"
	"fmt"
)

// Function is the PostgreSQL function a worker's role asks.
const Function = "coffer_worker_registration_gone"

// Statements create the function in the catalog's schema (%[1]s), as
// its owner (a server's role, which reads every row of the registry),
// executable by the workers' group role only. The search path is fixed:
// a SECURITY DEFINER function must not resolve names in its caller's.
// They are stated again with the workers' other grants, so an older
// catalog gets them at a server's next start.
var Statements = []string{
	`CREATE OR REPLACE FUNCTION %[1]s.` + Function + `(worker_name text, worker_epoch bigint) RETURNS boolean
		LANGUAGE sql STABLE SECURITY DEFINER SET search_path = %[1]s, pg_temp
		AS $$ SELECT COALESCE((SELECT epoch > worker_epoch OR (epoch = worker_epoch AND state = 'lost')
			FROM workers WHERE name = worker_name), true) $$`,
	`REVOKE ALL ON FUNCTION %[1]s.` + Function + `(text, bigint) FROM PUBLIC`,
	`GRANT EXECUTE ON FUNCTION %[1]s.` + Function + `(text, bigint) TO coffer_worker`,
}

// Rows are a query's rows (sqlcat.Rows).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// QueryFunc runs a read (placeholders as ?, rebound by the caller).
type QueryFunc func(ctx context.Context, q string, args ...any) (Rows, error)

// Gone says whether registration epoch of worker name is dead: the name
// is gone from the registry, registered again since (a higher epoch), or
// lost. On PostgreSQL it asks Function when it exists (it does once the
// workers' group role does: a process logged in with a worker's role
// reads only its own row); otherwise it reads the row itself.
func Gone(ctx context.Context, postgres bool, query QueryFunc, name string, epoch int64) (bool, error) {
	if postgres {
		exists, err := one[bool](ctx, query, `SELECT to_regprocedure(?) IS NOT NULL`, Function+"(text,bigint)")
		if err != nil {
			return false, err
		}
		if exists {
			return one[bool](ctx, query, `SELECT `+Function+`(?, ?)`, name, epoch)
		}
	}
	rows, err := query(ctx, `SELECT epoch, state FROM workers WHERE name = ?`, name)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return true, rows.Err()
	}
	var current int64
	var state string
	if err := rows.Scan(&current, &state); err != nil {
		return false, err
	}
	return current > epoch || current == epoch && state == "lost", rows.Err()
}

// one is the single value a query returns.
func one[T any](ctx context.Context, query QueryFunc, q string, args ...any) (T, error) {
	var v T
	rows, err := query(ctx, q, args...)
	if err != nil {
		return v, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return v, err
		}
		return v, fmt.Errorf("registrystate: %q returned no row", q)
	}
	if err := rows.Scan(&v); err != nil {
		return v, err
	}
	return v, rows.Err()
}

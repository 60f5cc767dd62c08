package catalog

// What becomes of each table of the catalog when the server is lost
// (issue 39, the server's own recovery). `coffer catalog export
// --to-repository` copies the tables that nothing else can bring back;
// every other table says why it need not be copied. A test
// (TestDump/EveryTableIsDeclared of internal/catalog/sqlite and
// internal/catalog/postgres) enumerates the tables of a migrated catalog
// and fails on one that is not declared here: a migration that adds a table decides here
// what its rows are worth.

// TableFate is what an export does with a table.
type TableFate string

const (
	// Exported: state nothing else holds (users, grants, configuration
	// made through the API, the audit log...). Every column is copied.
	Exported TableFate = "exported"
	// History: the record of past runs, copied when an export asks for
	// the history too (it can be most of a large catalog's rows).
	History TableFate = "history"
	// Rebuildable: recreated from what survives the server (the
	// repository, the hypervisors).
	Rebuildable TableFate = "rebuildable"
	// Transient: short-lived state a new server starts without.
	Transient TableFate = "transient"
)

// TableDecl declares the fate of one table.
type TableDecl struct {
	Name string
	Fate TableFate
	// Why: for a table that is not exported, how the server does without
	// it; for one that is, what it holds.
	Why string
	// Seeded: a migration inserts rows of its own into the table (a
	// counter at zero), so rows that equal the seed do not make a
	// catalog non-empty.
	Seeded bool
}

// Tables declares every table of the catalog's schema, exported ones in
// the order an import inserts them: a table after those it refers to.
var Tables = []TableDecl{
	{Name: "users", Fate: Exported, Why: "local users and their password hashes (argon2id)"},
	{Name: "api_tokens", Fate: Exported, Why: "API tokens: their SHA-256 hashes, owners and expiry; an old token works after an import"},
	{Name: "acl", Fate: Exported, Why: "who may do what on which object"},
	{Name: "second_factors", Fate: Exported, Why: "users' TOTP seeds, sealed with the server's second-factor key (STATE/server/second-factor.key): restore that file beside the import, or the users sign in with a recovery code and enrol again"},
	{Name: "recovery_codes", Fate: Exported, Why: "users' one-time recovery codes (hashes)"},
	{Name: "webauthn_credentials", Fate: Exported, Why: "users' security keys and passkeys (public keys)"},
	{Name: "audit_log", Fate: Exported, Why: "the audit log"},
	{Name: "config_objects", Fate: Exported, Why: "configuration objects created through the API"},
	{Name: "config_generation", Fate: Exported, Seeded: true, Why: "the configuration's generation, which versions the objects"},
	{Name: "notification_events", Fate: Exported, Why: "notifications raised"},
	{Name: "notification_deliveries", Fate: Exported, Why: "their delivery state, so that nothing is sent twice nor forgotten"},
	{Name: "media_volumes", Fate: Exported, Why: "the media inventory: tape volumes, pools, protection"},
	{Name: "media_segments", Fate: Exported, Why: "what is on which volume"},
	{Name: "schedule_runs", Fate: Exported, Why: "the schedule slots already run, so that a restored server does not run them again"},
	{Name: "repository_usage", Fate: Exported, Why: "the repositories' usage over time (capacity trends)"},
	{Name: "jobs", Fate: History, Why: "jobs run: copied with --history; the points they made are rebuilt from the repository"},
	{Name: "tasks", Fate: History, Why: "per-VM tasks of the jobs: copied with --history"},
	{Name: "events", Fate: History, Why: "the jobs' logs: copied with --history"},
	{Name: "backup_points", Fate: Rebuildable, Why: "`coffer catalog rebuild` lists them from the repository"},
	{Name: "vms", Fate: Rebuildable, Why: "the inventory: the next refresh reads it from the hypervisors"},
	{Name: "inventory_refresh", Fate: Rebuildable, Why: "when each connection was refreshed: the next refresh writes it"},
	{Name: "workers", Fate: Rebuildable, Why: "the fleet's worker registry: every worker registers again when it starts (its credential is a PostgreSQL role, kept by the database server, not in a table)"},
	{Name: "replicas", Fate: Rebuildable, Why: "each standby's own record on its host (replica.json) holds its points: the next replication run records them again"},
	{Name: "sessions", Fate: Transient, Why: "console sign-ins: users sign in again"},
	{Name: "setup_tokens", Fate: Transient, Why: "one-time setup links that expire within hours: an administrator issues a new one"},
	{Name: "login_throttle", Fate: Transient, Why: "recent failed sign-ins: the throttle starts afresh"},
	{Name: "leases", Fate: Transient, Why: "which server holds the schedules now: the new server takes them"},
	{Name: "schema_migrations", Fate: Transient, Why: "the schema version: recorded in the export's manifest; the importing coffer migrates its own"},
}

// Table returns the declaration of the table named name.
func Table(name string) (TableDecl, bool) {
	for _, t := range Tables {
		if t.Name == name {
			return t, true
		}
	}
	return TableDecl{}, false
}

// ExportedTables lists the tables an export copies, in insertion order:
// the Exported ones, and the History ones too when history is set.
func ExportedTables(history bool) []string {
	var out []string
	for _, t := range Tables {
		if t.Fate == Exported || (history && t.Fate == History) {
			out = append(out, t.Name)
		}
	}
	return out
}

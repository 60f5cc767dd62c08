package workercmd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// tokenEnv is a PostgreSQL catalog that asks every role but the test's
// superuser for its password, and the catalog's address without
// credentials, as a worker is given it.
func tokenEnv(t *testing.T) (e *clitest.Env, address string) {
	dsn := testutil.StartPostgres(t)
	testutil.RequirePasswords(t, dsn)
	return pgEnv(t, dsn), strings.Replace(dsn, "test@", "", 1)
}

// createToken runs coffer workers token create and stores the token in a
// file of the env's, returning both.
func createToken(e *clitest.Env, name string) (token, file string) {
	e.T.Helper()
	token = strings.TrimSpace(e.Must("workers", "token", "create", name))
	file = filepath.Join(e.Dir, name+".token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		e.T.Fatal(err)
	}
	return token, file
}

// createTokenThroughServer creates a worker's token through the server's
// API as an administrator, after an Auditor was refused it; both are in
// the audit log, which holds no token.
func createTokenThroughServer(t *testing.T, e *clitest.Env, srv *clitest.ServerProc, admin string, cat catalog.Catalog,
	name string) (token, file string) {
	t.Helper()
	auditor := strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/=Auditor", "--lifetime", "1d"))
	if code, _, errOut := e.Remote(srv, auditor, "workers", "token", "create", name); code != 3 {
		t.Fatalf("an Auditor created a worker token: exit %d %s", code, errOut)
	}
	code, out, errOut := e.Remote(srv, admin, "workers", "token", "create", name)
	if code != 0 {
		t.Fatalf("create a worker token through the server: exit %d %s", code, errOut)
	}
	token = strings.TrimSpace(out)
	file = filepath.Join(e.Dir, name+".token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := cat.ListAudit(context.Background(), catalog.AuditFilter{Operation: "create-worker-token"})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]int{}
	for _, r := range recs {
		results[r.Result]++
		if strings.Contains(fmt.Sprintf("%+v", r), strings.SplitN(token, ".", 3)[2]) {
			t.Errorf("the audit log holds the token: %+v", r)
		}
	}
	if results[catalog.AuditOK] != 1 || results[catalog.AuditDenied] != 1 {
		t.Errorf("the audit log's create-worker-token records: %+v", recs)
	}
	return token, file
}

// The token tests' timings: longer than the other tests' (a worker that
// fenced itself under a loaded machine would leave its connection's
// units nowhere to run), since a revocation does not wait for them: the
// worker fences itself at its next renewal, and the watch (a look every
// tenth of the dead interval) finds its heartbeat expired.
const (
	tokenBeat = time.Second
	tokenDead = 10 * time.Second
)

// tokenConfig is unitsConfig with the token tests' dead interval.
var tokenConfig = strings.Replace(unitsConfig, "worker-dead-after: 2s", "worker-dead-after: "+tokenDead.String(), 1)

// startTokenWorker starts `coffer worker` with its token, reaching one
// connection.
func startTokenWorker(e *clitest.Env, address, tokenFile, connection string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	return e.StartCoffer(registered, patience, "worker", "--catalog", address, "--token-file", tokenFile, "--slots", "2",
		"--reach-connections", connection, "--heartbeat", tokenBeat.String(), "--dead-after", tokenDead.String(), "--log-level", "info")
}

// runBounded runs the policy through the server and waits for its job,
// at most twice patience.
func runBounded(t *testing.T, srv *clitest.ServerProc, token string) api.Job {
	t.Helper()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "fleet") }()
	return awaitRun(t, srv, done)
}

func awaitRun(t *testing.T, srv *clitest.ServerProc, done <-chan api.Job) api.Job {
	t.Helper()
	select {
	case j := <-done:
		return j
	case <-time.After(2 * patience):
		t.Fatalf("the run did not end within %s\n%s", 2*patience, srv.Log())
		return api.Job{}
	}
}

// loginAs opens a session of the catalog's database as a worker's role
// with the secret of its token.
func loginAs(t *testing.T, address, token string) (*pgx.Conn, error) {
	t.Helper()
	parts := strings.SplitN(token, ".", 3)
	cfg, err := pgx.ParseConfig(address)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = "coffer_worker_"+parts[1], parts[2]
	return pgx.ConnectConfig(context.Background(), cfg)
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestWorkersWithTokens: workers logged in with their own tokens run a
// policy's units; their role reads none of the access tables and cannot
// change another worker's row; River's job arguments hold no secret; a
// revoked token cuts its worker off at once (its units re-admitted, it
// cannot log in again), and a new token lets it back.
func TestWorkersWithTokens(t *testing.T) {
	e, address := tokenEnv(t)
	e.Config(tokenConfig)
	srv := e.StartServer()
	admin := e.AdminToken()
	cat := openCatalog(t, e)
	token1, file1 := createToken(e, "kvm1")
	token2, file2 := createTokenThroughServer(t, e, srv, admin, cat, "kvm2")
	w1 := startTokenWorker(e, address, file1, "east")
	startTokenWorker(e, address, file2, "west")
	waitLog(t, srv, "the engine given both workers", "workers=kvm1,kvm2")
	ws := clitest.Decode[[]api.Worker](t, e.Must("workers", "--json"))
	for _, w := range ws {
		if w.Credential != "active" {
			t.Errorf("worker %s's credential: %q", w.Name, w.Credential)
		}
	}

	job := runBounded(t, srv, admin)
	if job.Status != "success" || job.TasksOK != 6 {
		t.Fatalf("run fleet: %+v\n%s", job, srv.Log())
	}
	checkUnits(t, cat, job, 1)
	if t.Failed() {
		t.Fatalf("server:\n%s\nkvm1:\n%s", srv.Log(), w1.Log())
	}
	for _, w := range []*clitest.ServerProc{srv, w1} {
		if log := w.Log(); strings.Contains(log, token1) || strings.Contains(log, strings.SplitN(token1, ".", 3)[2]) {
			t.Errorf("a process logged kvm1's token:\n%s", log)
		}
	}
	checkJobArgs(t, e, token1, token2)
	checkWorkerRole(t, address, token1)

	revokeRunning(t, e, srv, cat, w1, admin, address, token1)
}

// checkJobArgs scans the arguments of every River job for a secret: the
// repository's password, the workers' tokens.
func checkJobArgs(t *testing.T, e *clitest.Env, tokens ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT kind, args::text FROM river.river_job`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	secrets := []string{e.Vars["COFFER_PASSWORD"], "password", "secret"}
	for _, tok := range tokens {
		secrets = append(secrets, tok, strings.SplitN(tok, ".", 3)[2])
	}
	for rows.Next() {
		var kind, args string
		if err := rows.Scan(&kind, &args); err != nil {
			t.Fatal(err)
		}
		n++
		for _, s := range secrets {
			if strings.Contains(strings.ToLower(args), strings.ToLower(s)) {
				t.Errorf("a %s job's arguments hold %q: %s", kind, s, args)
			}
		}
	}
	if err := rows.Err(); err != nil || n < 6 {
		t.Fatalf("%d River jobs scanned (%v), want the run's 6 at least", n, err)
	}
	t.Logf("%d River jobs' arguments scanned: no secret", n)
}

// checkWorkerRole logs in as kvm1's role, as a thief of its token would.
func checkWorkerRole(t *testing.T, address, token string) {
	t.Helper()
	ctx := context.Background()
	w, err := loginAs(t, address, token)
	if err != nil {
		t.Fatalf("log in with kvm1's token: %v", err)
	}
	defer func() { _ = w.Close(ctx) }()
	for _, table := range []string{"users", "api_tokens", "sessions", "acl", "audit_log", "setup_tokens"} {
		if _, err := w.Exec(ctx, `SELECT * FROM `+table+` LIMIT 1`); sqlState(err) != "42501" {
			t.Errorf("SELECT from %s with a worker's token: %v, want permission denied", table, err)
		}
	}
	tag, err := w.Exec(ctx, `UPDATE workers SET state = 'draining', slots = 99 WHERE name = 'kvm2'`)
	if err != nil || tag.RowsAffected() != 0 {
		t.Errorf("kvm1's role changed kvm2's row: %v, %d rows", err, tag.RowsAffected())
	}
	var states []string
	rows, err := w.Query(ctx, `SELECT name FROM workers`)
	if err == nil {
		states, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(states) != 1 || states[0] != "kvm1" {
		t.Errorf("kvm1's role sees the registry rows %v (%v), want its own", states, err)
	}
	checkQueueConfined(t, w)
}

// checkQueueConfined: a worker's role reaches its own queue's jobs only. A
// job it inserts into the servers' queue (which runs any operation) or
// another worker's is refused, and it sees none of theirs, although the
// run before left jobs in both workers' queues.
func checkQueueConfined(t *testing.T, w *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	for _, queue := range []string{"srv", "w-kvm2"} {
		_, err := w.Exec(ctx, `INSERT INTO river.river_job (args, kind, max_attempts, queue, state)
			VALUES ('{"operation":"delete-user"}', 'coffer_operation', 1, $1, 'available')`, queue)
		if sqlState(err) != "42501" {
			t.Errorf("kvm1's role inserted a job into queue %s: %v, want a row-level security refusal", queue, err)
		}
	}
	var own, others int
	err := w.QueryRow(ctx, `SELECT count(*) FILTER (WHERE queue = 'w-kvm1'), count(*) FILTER (WHERE queue <> 'w-kvm1') FROM river.river_job`).Scan(&own, &others)
	if err != nil || own == 0 || others != 0 {
		t.Errorf("kvm1's role sees %d jobs of its queue and %d of others (%v): want its own only", own, others, err)
	}
}

// revokeRunning revokes kvm1's token while it backs up a VM: the worker
// exits 1 at once, is declared lost, its unit is re-admitted; its token
// no longer logs in; a new token lets a new process finish the run.
func revokeRunning(t *testing.T, e *clitest.Env, srv *clitest.ServerProc, cat catalog.Catalog, w1 *clitest.ServerProc,
	admin, address, token1 string) {
	t.Helper()
	since := time.Now()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(admin, "fleet") }()
	ev := waitEvent(t, cat, since, "kvm1")
	out := e.Must("workers", "token", "revoke", "kvm1", "--json")
	revoked := time.Now()
	r := clitest.Decode[api.WorkerTokenRevoked](t, out)
	if r.Sessions == 0 || !r.Expired {
		t.Errorf("revoke: %+v", r)
	}
	waitLog(t, w1, "kvm1 fenced", "refused worker kvm1's credential")
	t.Logf("the revoked worker fenced itself %s after the revocation", time.Since(revoked).Round(time.Millisecond))
	waitWorker(t, cat, "kvm1", "kvm1 lost", func(w catalog.Worker) bool { return w.State == catalog.WorkerLost })
	waitLog(t, srv, "kvm1's units re-admitted", "a lost worker's running units are re-admitted")
	t.Logf("kvm1's units re-admitted %s after the revocation", time.Since(revoked).Round(time.Millisecond))
	if err := awaitExit(t, w1); err == nil {
		t.Fatalf("the revoked worker exited 0:\n%s", w1.Log())
	}
	t.Logf("the revoked worker exited %s after the revocation", time.Since(revoked).Round(time.Millisecond))
	if _, err := loginAs(t, address, token1); sqlState(err) != "28000" {
		t.Errorf("log in with the revoked token: %v", err)
	}
	// The revoked token, and one never issued, are refused with the reason.
	for _, tok := range []string{token1, "cwt1.kvm1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if err := os.WriteFile(filepath.Join(e.Dir, "old.token"), []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		out := e.Expect(3, "worker", "--catalog", address, "--token-file", filepath.Join(e.Dir, "old.token"))
		if !strings.Contains(out, "the catalog refused worker kvm1's token") || strings.Contains(out, strings.SplitN(tok, ".", 3)[2]) {
			t.Errorf("a refused token: %s", out)
		}
	}
	if ws := clitest.Decode[[]api.Worker](t, e.Must("workers", "--json")); len(ws) == 0 || ws[0].Credential != "revoked" {
		t.Errorf("the workers after the revocation: %+v", ws)
	}

	_, file := createToken(e, "kvm1")
	startTokenWorker(e, address, file, "east")
	j := awaitRun(t, srv, done)
	if j.Status != "success" || j.ID != ev.JobID {
		t.Fatalf("the run with a revoked worker: %+v\n%s", j, srv.Log())
	}
	checkUnits(t, cat, j, 2)
}

// Bad input: a malformed token, a token with an address that has
// credentials, a SQLite catalog.
func TestWorkerTokenRefusals(t *testing.T) {
	e := clitest.NewEnv(t)
	if out := e.Expect(2, "worker", "--name", "kvm1"); !strings.Contains(out, "a worker needs its servers' PostgreSQL catalog") {
		t.Errorf("a worker on SQLite: %s", out)
	}
	if out := e.Expect(2, "workers", "token", "create", "kvm1"); !strings.Contains(out, "workers need a PostgreSQL catalog") {
		t.Errorf("a token on SQLite: %s", out)
	}
	bad := filepath.Join(e.Dir, "bad.token")
	for tok, want := range map[string]string{
		"hunter2":                  `a worker token starts with "cwt1."`,
		"cwt1.KVM.secret":          "a worker token is cwt1.<worker name>.<secret>",
		"cwt1.kvm1.c2hvcnQ":        "is not 32 bytes of base64url",
		"cwt1.kvm1.c2hvcnQ.extra!": "is not 32 bytes of base64url",
	} {
		if err := os.WriteFile(bad, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		out := e.Expect(2, "worker", "--catalog", "postgres://127.0.0.1:1/coffer", "--token-file", bad)
		if !strings.Contains(out, want) {
			t.Errorf("token %q: %s, want %q", tok, out, want)
		}
	}
	good := "cwt1.kvm1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	if err := os.WriteFile(bad, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.Expect(2, "worker", "--catalog", "postgres://coffer:pw@127.0.0.1:1/coffer", "--token-file", bad)
	if !strings.Contains(out, "without a user or password") || strings.Contains(out, "pw@") {
		t.Errorf("an address with credentials: %s", out)
	}
	if out := e.Expect(2, "worker", "--name", "kvm2", "--catalog", "postgres://127.0.0.1:1/coffer", "--token-file", bad); !strings.Contains(out, "the token is worker kvm1's") {
		t.Errorf("another worker's token: %s", out)
	}
}

// A worker with a token never migrates: while no server has migrated
// River's schema it waits --schema-wait, saying so, then is refused
// (exit 8) and leaves no row, and so is a catalog migrated by a newer
// coffer.
func TestTokenWorkerRefusesSchemaSkew(t *testing.T) {
	e, address := tokenEnv(t)
	_, file := createToken(e, "kvm1")
	out := e.Expect(8, "worker", "--catalog", address, "--token-file", file, "--schema-wait", "1s", "--log-level", "info")
	if !strings.Contains(out, "start a server of this version first") || !strings.Contains(out, schemaWaitLog) {
		t.Errorf("River's schema not yet migrated: %s", out)
	}
	cat := openCatalog(t, e)
	if ws, err := cat.ListWorkers(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("a refused worker left a row: %+v %v", ws, err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	out = e.Expect(8, "worker", "--catalog", address, "--token-file", file)
	if !strings.Contains(out, "catalog schema version 999 is newer than this coffer speaks") {
		t.Errorf("a newer catalog: %s", out)
	}
}

package workercmd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// schemaWaitLog is what a worker logs while it waits for River's schema.
const schemaWaitLog = "waiting for a server of this version to migrate it"

// TestWorkerWaitsForItsRiverSchema: a worker started before any server of
// its version (a rolling start) waits for River's schema, saying so, and
// registers once a server has migrated it, without being restarted; a
// schema newer than its own is refused at once (exit 8), without a wait.
func TestWorkerWaitsForItsRiverSchema(t *testing.T) {
	e, address := tokenEnv(t)
	e.Config(tokenConfig)
	_, file := createToken(e, "kvm1")
	waiting := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), schemaWaitLog) }
	w := e.StartCoffer(waiting, patience, "worker", "--catalog", address, "--token-file", file, "--slots", "2",
		"--reach-connections", "east", "--log-level", "info")
	started := time.Now()
	srv := e.StartServer()
	waitLog(t, w, "the worker registers once the server migrated River's schema", "worker registered")
	t.Logf("the waiting worker registered %s after the server started", time.Since(started).Round(time.Millisecond))
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `INSERT INTO river.river_migration (line, version) VALUES ('main', 999)`); err != nil {
		t.Fatal(err)
	}
	out := e.Expect(8, "worker", "--catalog", address, "--token-file", file, "--log-level", "info")
	if !strings.Contains(out, "newer than this coffer speaks") || strings.Contains(out, schemaWaitLog) {
		t.Errorf("a newer River schema, with the default wait: %s", out)
	}
}

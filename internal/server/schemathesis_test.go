package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestSchemathesis runs schemathesis (scripts/ci/install-schemathesis.sh)
// against the served OpenAPI document, with the administrator's API
// token, on a server with real data (a repository with points of a
// simulated fleet and of a disk image, a catalog with jobs): generated
// requests of every operation, valid and not, must get no server error,
// and every answer must match its documented status, content type and
// schema. The run is bounded (examples per operation, a time budget of
// two minutes).
func TestSchemathesis(t *testing.T) {
	st := testutil.RequireBinary(t, "coffer-schemathesis")
	if testing.Short() {
		t.Skip("schemathesis takes minutes")
	}
	e := newEnv(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	report := filepath.Join(t.TempDir(), "report")
	cmd := exec.CommandContext(ctx, st, "run", e.http.URL+Prefix+"/openapi.json",
		"--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance",
		"--header", "Authorization: Bearer "+e.tokens["admin"],
		// One worker: with two, CPython 3.11's ast module, which hypothesis
		// uses to describe its filters, failed under load with "AST
		// constructor recursion depth mismatch" (a run error, not coffer's).
		"--max-examples", "8", "--seed", "20261125", "--workers", "1", "--request-timeout", "120",
		"--phases", "examples,coverage,fuzzing", "--max-time", "120", "--generation-database", "none",
		// Removing keys at random takes the repository away from the
		// password every other operation opens it with; coffer's own
		// tests cover removing keys.
		"--exclude-operation-id", "remove-key",
		// Revoking tokens at random revokes the one this run holds (it
		// lists them), and every later request would test only the 401;
		// internal/auth and the RBAC tests cover revoking.
		"--exclude-operation-id", "revoke-token",
		// Measuring a device writes files of up to 64 GiB where the
		// request says, and measuring the pipeline computes for as long
		// as its size asks: neither belongs in a fuzzing budget.
		// internal/measure and the command line's tests cover them. The
		// pipeline measured as a task answers at once, but the task then
		// computes on every core for the rest of the run (1 TiB at the
		// bound), and 1,024 workers at level 19 hold an encoder each:
		// TestBenchPipelineAsTask (internal/cli/backupcmd) sends its
		// extremes, and one past each bound, instead.
		"--exclude-operation-id", "bench-device", "--exclude-operation-id", "bench-pipeline",
		"--exclude-operation-id", "start-bench-pipeline",
		"--suppress-health-check", "all", "--generation-with-security-parameters", "false", "--no-color", "--report-dir", report)
	cmd.Env = append(os.Environ(), "SCHEMATHESIS_HOOKS=")
	// schemathesis and hypothesis keep caches (.schemathesis/,
	// .hypothesis/) in the working directory: not in the source tree.
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("schemathesis: %v\n%s", err, out)
	}
	t.Logf("%s", lastLines(string(out), 40))
	// The run is worth something only if it was authenticated to the end.
	if _, err := e.access.AuthenticateToken(context.Background(), e.tokens["admin"]); err != nil {
		t.Errorf("the administrator's token no longer authenticates after the run: %v", err)
	}
}

func lastLines(s string, n int) string {
	lines := []byte(s)
	count := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i] == '\n' {
			count++
			if count > n {
				return string(lines[i+1:])
			}
		}
	}
	return s
}

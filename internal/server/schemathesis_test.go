package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
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
	schemathesis(ctx, t, st, e,
		"--max-examples", "8", "--phases", "examples,coverage,fuzzing", "--max-time", "120",
		// Removing keys at random takes the repository away from the
		// password every other operation opens it with; coffer's own
		// tests cover removing keys.
		"--exclude-operation-id", "remove-key",
		// Revoking tokens at random revokes the one this run holds (it
		// lists them), and every later request would test only the 401;
		// internal/auth and the RBAC tests cover revoking.
		"--exclude-operation-id", "revoke-token",
		// Measuring a device writes files of up to 64 GiB where the
		// request says, and measuring the pipeline in the request
		// computes for as long as its size asks: neither belongs in a
		// fuzzing budget. internal/measure and the command line's tests
		// cover them. The pipeline measured as a task gets its own run
		// below.
		"--exclude-operation-id", "bench-device", "--exclude-operation-id", "bench-pipeline",
		"--exclude-operation-id", "start-bench-pipeline")
	// The pipeline measured as a task, alone: its coverage phase sends
	// the extremes of every bound (1 TiB, 1,024 workers, 20 levels of up
	// to 19) and one past each. The first it takes answers at once and
	// runs on every core (the later ones get 409), so the run is short
	// and its tasks are cancelled at its end.
	schemathesis(ctx, t, st, e, "--include-operation-id", "start-bench-pipeline", "--phases", "examples,coverage", "--max-time", "60")
	measured := cancelRunning(t, e, "bench-pipeline")
	t.Logf("measurements started by the fuzzing and cancelled: %d", measured)
	// The run is worth something only if it was authenticated to the end.
	if _, err := e.access.AuthenticateToken(context.Background(), e.tokens["admin"]); err != nil {
		t.Errorf("the administrator's token no longer authenticates after the run: %v", err)
	}
}

// schemathesis runs schemathesis st against e's OpenAPI document as the
// administrator, with the checks and settings of every run and args.
func schemathesis(ctx context.Context, t *testing.T, st string, e *env, args ...string) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report")
	all := append([]string{"run", e.http.URL + Prefix + "/openapi.json",
		"--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance",
		"--header", "Authorization: Bearer " + e.tokens["admin"],
		// One worker: with two, CPython 3.11's ast module, which hypothesis
		// uses to describe its filters, failed under load with "AST
		// constructor recursion depth mismatch" (a run error, not coffer's).
		"--seed", "20261125", "--workers", "1", "--request-timeout", "120", "--generation-database", "none",
		"--suppress-health-check", "all", "--generation-with-security-parameters", "false", "--no-color", "--report-dir", report},
		args...)
	cmd := exec.CommandContext(ctx, st, all...)
	cmd.Env = append(os.Environ(), "SCHEMATHESIS_HOOKS=")
	// schemathesis and hypothesis keep caches (.schemathesis/,
	// .hypothesis/) in the working directory: not in the source tree.
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("schemathesis %v: %v\n%s", args, err, out)
	}
	t.Logf("%s", lastLines(string(out), 40))
}

// cancelRunning cancels e's running jobs of kind, and returns how many
// there were.
func cancelRunning(t *testing.T, e *env, kind string) int {
	t.Helper()
	res := e.do(e.tokens["admin"], "GET", "/jobs?kind="+kind+"&status=running", nil)
	var jobs []api.Job
	if res.status != 200 || json.Unmarshal(res.body, &jobs) != nil {
		t.Fatalf("running %s jobs: HTTP %d %s", kind, res.status, res.body)
	}
	for _, j := range jobs {
		if res := e.do(e.tokens["admin"], "POST", fmt.Sprintf("/jobs/%d/cancel", j.ID), nil); res.status != 200 {
			t.Errorf("cancel %s job %d: HTTP %d %s", kind, j.ID, res.status, res.body)
		}
	}
	return len(jobs)
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

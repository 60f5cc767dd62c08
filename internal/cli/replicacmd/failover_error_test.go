package replicacmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestFailoverRunFailureIsReported: the error of a failover operation is
// reported by the command and kept in its job. A failover whose standby
// was never replicated fails its step: the command shows the step and
// exits 1, and the job's error in the catalog names that step and why,
// not only that the plan did not pass. A test failover that fails as a
// whole (its state directory cannot be made) and a planned failover
// whose final replication fails have no step to show: with --json the
// error document is printed (not an empty run document), without it the
// message on stderr and no empty table.
func TestFailoverRunFailureIsReported(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	if err := os.WriteFile(filepath.Join(e.Dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "file", "state") // under a file: it cannot be made
	e.Config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + e.Dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web-1], connection: dr, directory: ` + filepath.Join(e.Dir, "dr") + `, keep: 2}
failover-plans:
  - name: shop
    replication: web-dr
    groups:
      - vms: [{name: web-1}]
        probes: ["tcp:9"]
`)
	const never = "the standby of web-1: no directory " // never replicated
	code, stdout, stderr := e.Run("failover", "run", "shop")
	if code != command.ExitFailure || !strings.Contains(stdout, "FAILED: "+never) || !strings.Contains(stderr, "group 1, web-1, failover: "+never) {
		t.Fatalf("failover run: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	jobs := clitest.Decode[[]api.Job](t, e.Must("jobs", "--json"))
	if len(jobs) != 1 || jobs[0].Status != "failed" || !strings.Contains(jobs[0].Error, "the failover plan did not pass: group 1, web-1, failover: "+never) {
		t.Fatalf("the failover's job: %+v", jobs)
	}

	for _, c := range []struct{ op, why string }{
		{"test", "/file: not a directory"},
		{"planned", "the final replication of web-1: replication web-dr: the repository has no backup point of a VM it names"},
	} {
		code, stdout, stderr = e.Run("failover", c.op, "shop", "--json")
		doc := clitest.Decode[api.CommandError](t, stdout)
		if code == 0 || stderr != "" || !strings.Contains(doc.Error.Message, c.why) || doc.ExitCode != code {
			t.Fatalf("failover %s --json: exit %d, stderr %q, document %s", c.op, code, stderr, stdout)
		}
		code, stdout, stderr = e.Run("failover", c.op, "shop")
		if code == 0 || stdout != "" || !strings.Contains(stderr, c.why) {
			t.Fatalf("failover %s: exit %d\nstdout %s\nstderr %s", c.op, code, stdout, stderr)
		}
	}
	jobs = clitest.Decode[[]api.Job](t, e.Must("jobs", "--json"))
	if len(jobs) != 5 || jobs[0].Status != "failed" || !strings.Contains(jobs[0].Error, "the repository has no backup point") {
		t.Fatalf("the jobs: %+v", jobs)
	}
}

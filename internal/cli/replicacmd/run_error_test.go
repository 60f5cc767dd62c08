package replicacmd_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestReplicasRunFailureIsReported: a run that fails as a whole (the
// repository holds no point of the replication's VMs) says why as every
// command does: with --json, the error document on stdout and nothing
// else; without, the message on stderr and no empty table on stdout.
func TestReplicasRunFailureIsReported(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + e.Dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web], connection: dr, directory: ` + filepath.Join(e.Dir, "dr") + `, keep: 2}
`)
	const why = "replication web-dr: the repository has no backup point of a VM it names"
	code, stdout, stderr := e.Run("replicas", "run", "web-dr", "--json")
	if code != command.ExitUsage || stderr != "" {
		t.Fatalf("--json: exit %d, stderr %q", code, stderr)
	}
	if doc := clitest.Decode[api.CommandError](t, stdout); doc.Error.Class != api.Invalid || !strings.Contains(doc.Error.Message, why) || doc.ExitCode != code {
		t.Fatalf("--json: the error document %+v", doc)
	}
	code, stdout, stderr = e.Run("replicas", "run", "web-dr")
	if code != command.ExitUsage || stdout != "" || !strings.Contains(stderr, why) {
		t.Fatalf("text: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

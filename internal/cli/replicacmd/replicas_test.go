package replicacmd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestReplicasFromTheCommandLine configures a replication, runs it after
// each of three backups of an image, and reads the standbys back: each
// run brings the standby to the newest point (qemu-img compare against
// a restore of that point), keeps two points, records them in the
// catalog, and shows them with their lag; a second run of the same point
// is up to date; a replication that does not exist is refused.
func TestReplicasFromTheCommandLine(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-nbd")
	e := clitest.NewEnv(t)
	e.Must("init")
	standbys := filepath.Join(e.Dir, "dr")
	e.Config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + e.Dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web], connection: dr, directory: ` + standbys + `, keep: 2, rpo: 2h}
`)
	img := e.Image("web.img", 8<<20, 3)
	for run := range 3 {
		if run > 0 {
			f, err := os.OpenFile(img, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(strings.Repeat("run", 4096)), int64(run)<<20); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		}
		e.Must("backup", "disk", img, "--name", "web")
		doc := clitest.Decode[api.ReplicationRun](t, e.Must("replicas", "run", "web-dr", "--json"))
		if len(doc.VMs) != 1 || doc.VMs[0].Error != "" || doc.VMs[0].UpToDate || len(doc.VMs[0].Points) != min(run+1, 2) {
			t.Fatalf("run %d: %+v", run, doc)
		}
		vm := doc.VMs[0]
		restored := filepath.Join(e.Dir, "restored.raw")
		_ = os.Remove(restored)
		e.Must("restore", "latest", "--to", restored)
		top := filepath.Join(vm.Directory, "disk-0-00000"+string(rune('1'+run))+".qcow2")
		if out, err := exec.Command("qemu-img", "compare", "-f", "qcow2", "-F", "raw", top, restored).CombinedOutput(); err != nil {
			t.Fatalf("run %d: the standby differs from the point: %v %s", run, err, out)
		}
	}
	again := clitest.Decode[api.ReplicationRun](t, e.Must("replicas", "run", "web-dr", "--json"))
	if !again.VMs[0].UpToDate {
		t.Fatalf("a second run of the same point: %+v", again.VMs[0])
	}
	rs := clitest.Decode[[]api.Replica](t, e.Must("replicas", "--json"))
	if len(rs) != 1 || rs[0].VM != "web" || len(rs[0].Points) != 2 || rs[0].Lagging || rs[0].RPOSeconds != 7200 || rs[0].LastError != "" {
		t.Fatalf("replicas: %+v", rs)
	}
	if out := e.Must("replicas"); !strings.Contains(out, "web-dr") || !strings.Contains(out, " ok") {
		t.Fatalf("replicas table:\n%s", out)
	}
	if out := e.Must("replicas", "points", "web-dr", "web"); strings.Count(out, "\n") != 3 {
		t.Fatalf("points table:\n%s", out)
	}
	if out := e.Expect(command.ExitNoRepo, "replicas", "run", "nope"); !strings.Contains(out, `no replication named "nope"`) {
		t.Fatalf("unknown replication: %s", out)
	}
}

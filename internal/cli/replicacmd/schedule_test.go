package replicacmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestReplicationRunsOnItsSchedule: a `coffer server` runs a replication
// with a schedule on its own, as it runs a policy's, recorded as jobs of
// its schedules (user @schedule): after each of two backups made beside
// it, the standby comes to the new point without anyone running it, and
// equals that point (qemu-img compare against a restore of it).
func TestReplicationRunsOnItsSchedule(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-nbd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	e.Must("init")
	standbys := filepath.Join(e.Dir, "dr")
	e.Config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + e.Dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web], connection: dr, directory: ` + standbys + `, keep: 2, schedule: "@every 1s"}
`)
	img := e.Image("web.img", 8<<20, 3)
	srv := e.StartServer()
	for run := range 2 {
		if run > 0 {
			f, err := os.OpenFile(img, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(strings.Repeat("sched", 4096)), 2<<20); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		}
		var point api.BackupPoint
		if err := json.Unmarshal([]byte(e.Must("backup", "disk", img, "--name", "web", "--json")), &point); err != nil {
			t.Fatal(err)
		}
		rep := waitReplicaAt(ctx, t, e, srv, point.ID)
		restored := filepath.Join(e.Dir, "restored.raw")
		_ = os.Remove(restored)
		e.Must("restore", point.ID, "--to", restored)
		top := filepath.Join(rep.Directory, fmt.Sprintf("disk-0-%06d.qcow2", rep.Points[len(rep.Points)-1].Seq))
		if out, err := exec.Command("qemu-img", "compare", "-f", "qcow2", "-F", "raw", top, restored).CombinedOutput(); err != nil {
			t.Fatalf("run %d: the standby differs from the point: %v %s", run, err, out)
		}
	}
	if j := e.JobOf("replicate"); j.User != "@schedule" {
		t.Fatalf("the replication's job %+v was not the schedule's", j)
	}
}

// waitReplicaAt waits until the standby of web equals the backup point id.
func waitReplicaAt(ctx context.Context, t *testing.T, e *clitest.Env, srv *clitest.ServerProc, id string) api.Replica {
	t.Helper()
	for {
		var rs []api.Replica
		if err := json.Unmarshal([]byte(e.Must("replicas", "--json")), &rs); err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 && len(rs[0].Points) > 0 && rs[0].Points[len(rs[0].Points)-1].BackupPoint == id {
			return rs[0]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the scheduled replication never brought the standby to %s: %+v\n%s", id, rs, srv.Log())
		case <-time.After(200 * time.Millisecond): // a poll's pace, not a synchronisation
		}
	}
}

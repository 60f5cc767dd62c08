package workercmd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/mo"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// vsphereArray is the exec storage provider of the simulated vCenter's
// datastore: vcsim's datastores are local directories, so the "array"
// copies the datastore's directory and presents the copy.
const vsphereArray = `#!/bin/sh
set -eu
test "$COFFER_DATASTORE" = "[LocalDS_0]"
case "$1" in
create) mkdir %[1]q/"$COFFER_LABEL"; cp -a %[2]q/. %[1]q/"$COFFER_LABEL"/; echo "$COFFER_LABEL" >> %[1]q.log ;;
present) echo %[1]q/"$COFFER_LABEL" ;;
list) ls %[1]q ;;
delete) rm -rf %[1]q/"$COFFER_LABEL" ;;
*) exit 3 ;;
esac
`

// TestVSphereBatchRunsOnTheWorkerThatMountsIt: a group: datastore policy
// on a vCenter that only a worker reaches runs its datastore's batch on
// that worker (the one whose reach names the datastore): the VM
// snapshots, the storage snapshot through the exec provider, their
// release and each VM's read from the storage snapshot. Every point
// restores to its VM's disk, and neither a VM snapshot nor a storage
// snapshot is left.
func TestVSphereBatchRunsOnTheWorkerThatMountsIt(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	vc := clitest.NewVCLab(t, vclab.Start(t, 1, 0))
	vc.CreateVM(context.Background(), "app-02")
	want := map[string][]byte{}
	for _, vm := range []string{"app-01", "app-02"} {
		data := make([]byte, vclab.DiskSize)
		_, _ = rand.Read(data[:vclab.DiskSize/2])
		vc.WriteFlat(vc.Disk(vm), data)
		want[vm] = data
	}
	snaps := filepath.Join(e.Dir, "array-snaps")
	if err := os.Mkdir(snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	dsDir := filepath.Dir(filepath.Dir(vc.Disk("app-01").Path))
	script := filepath.Join(e.Dir, "array.sh")
	if err := os.WriteFile(script, fmt.Appendf(nil, vsphereArray, snaps, dsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	e.Config(fmt.Sprintf("maintenance: {worker-dead-after: %s}\n", steadyDead) + vc.Connections(e) + fmt.Sprintf(`storage-snapshots:
  - {name: array, kind: exec, connections: [vc], datastores: ["[LocalDS_0]"], command: [%q]}
policies:
  - {name: vmfs, connection: vc, group: datastore, schedule: "0 3 1 1 *", retries: {attempts: 1}}
`, script))
	cat := openCatalog(t, e)
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	w := e.StartCoffer(registered, patience, append([]string{"worker", "--name", "proxy1", "--slots", "2", "--reach-connections", "vc",
		"--reach-datastores", "vc/LocalDS_0", "--heartbeat", beat.String(), "--dead-after", steadyDead.String(), "--log-level", "info"},
		e.WorkerLogin("proxy1")...)...)
	srv := e.StartServer()
	token := e.AdminToken()
	waitLog(t, srv, "the engine given the worker", "the engine places units on the workers", "workers=proxy1")
	j := srv.RunPolicy(token, "vmfs")
	if j.Status != "success" || j.TasksOK != 2 {
		t.Fatalf("run vmfs: %+v\n%s\nworker:\n%s", j, srv.Log(), w.Log())
	}
	if log := w.Log(); !strings.Contains(log, `"batch starts"`) || strings.Contains(log, `"VM unit starts"`) {
		t.Fatalf("the worker ran no batch, or a VM by VM unit:\n%s", log)
	}
	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("job %d's tasks: %d %v", j.ID, len(tasks), err)
	}
	for _, task := range tasks {
		if ran := ranOn(t, cat, task); ran != "proxy1" {
			t.Errorf("%s ran on %q, want proxy1", task.VMName, ran)
		}
		restored := filepath.Join(e.Dir, task.VMName+".raw")
		e.Must("restore", task.BackupPointID, "--to", restored)
		if got, err := os.ReadFile(restored); err != nil || !bytes.Equal(got, want[task.VMName]) {
			t.Errorf("%s's point differs from its disk: %v", task.VMName, err)
		}
	}
	if created, err := os.ReadFile(snaps + ".log"); err != nil || strings.Count(string(created), "\n") != 1 {
		t.Errorf("storage snapshots created: %q %v, want the batch's one", created, err)
	}
	if left, _ := os.ReadDir(snaps); len(left) != 0 {
		t.Errorf("storage snapshots left on the array: %v", left)
	}
	var vms []mo.VirtualMachine
	vc.Retrieve(context.Background(), "VirtualMachine", []string{"name", "snapshot"}, &vms)
	for _, vm := range vms {
		if vm.Snapshot != nil && len(vm.Snapshot.RootSnapshotList) > 0 {
			t.Errorf("%s keeps a snapshot", vm.Name)
		}
	}
}

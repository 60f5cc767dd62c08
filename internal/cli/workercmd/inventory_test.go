package workercmd_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// hiddenFrom runs a child process in a mount namespace of its own where
// dir is an empty tmpfs: what lies in dir on this machine (a QEMU's
// monitor socket) is out of the child's sight, as a worker's host's
// sockets are out of a server's on another machine.
type hiddenFrom struct{ dir string }

func (h hiddenFrom) Command(name string, args ...string) *exec.Cmd {
	script := `mount -t tmpfs -o size=64k,mode=0700 coffer-hidden "$0" && exec "$@"`
	return exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, h.dir, name}, args...)...)
}

// TestTheWorkersConnectionIsNotTheServers: the guest's QMP socket is in
// a directory the server cannot see (its own mount namespace has an
// empty tmpfs there); the worker on host kvm1 sees it. The server never
// opens connection kvm1: its engine's start cleans nothing of it, a
// policy run through its API lists the guest on the worker and backs it
// up there, and the API's VM list shows the guest with its point; a
// backup of the guest alone runs on the worker too. The server's qemu
// state directory, which opening the connection creates, does not exist.
func TestTheWorkersConnectionIsNotTheServers(t *testing.T) {
	testutil.RequireBinary(t, "qemu-system-x86_64") // skips where QEMU is missing
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "unshare")
	testutil.RequireBinary(t, "nsenter")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lab := testutil.NewNetLab(t, "kvm1")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	hidden := filepath.Join(e.Dir, "kvm1-host") // the worker's host's own files
	vm := bootSmallGuest(t, ctx, hidden)
	e.Config(fmt.Sprintf(guestConfig, dead, vm.QMPPath))
	cat := openCatalog(t, e)
	state := filepath.Join(e.Dir, "kvm1-state")
	w := startGuestWorker(e, lab.Hosts()[0], state)
	waitWorker(t, cat, "kvm1", "kvm1 ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })

	// The server starts with the worker registered, as a restarted
	// server finds it, and cannot see the guest's socket.
	e.Host = hiddenFrom{hidden}
	srv := e.StartServer()
	e.Host = nil
	if err := exec.Command("nsenter", "--target", strconv.Itoa(srv.Cmd.Process.Pid), "--mount", "test", "-e", vm.QMPPath).Run(); err == nil {
		t.Fatalf("the server's process sees %s", vm.QMPPath)
	}
	token := e.AdminToken()
	waitLog(t, srv, "the engine given kvm1", "the engine places units on the workers", "workers=kvm1")

	started := time.Now()
	j := srv.RunPolicy(token, "fleet")
	if j.Status != "success" || j.TasksOK != 1 {
		t.Fatalf("run fleet: %+v\nserver:\n%s\nworker:\n%s", j, srv.Log(), w.Log())
	}
	ev := waitEvent(t, cat, started, "kvm1")
	t.Logf("the run through the server took %.1fs; its unit ran on %s", j.DurationSeconds, ev.Fields["worker"])

	var refreshed api.InventoryRefresh
	asked := time.Now()
	if code, _ := srv.Call(token, "POST", "/connections/kvm1/inventory/refresh", nil, &refreshed); code != http.StatusOK || refreshed.VMs != 1 {
		t.Fatalf("refresh kvm1's inventory through the server: %d %+v\n%s", code, refreshed, srv.Log())
	}
	t.Logf("kvm1's inventory refreshed through the server, listed on the worker, in %s", time.Since(asked).Round(time.Millisecond))
	var inv api.Inventory
	if code, _ := srv.Call(token, "GET", "/vms", nil, &inv); code != http.StatusOK || len(inv.Errors) != 0 || len(inv.VMs) != 1 {
		t.Fatalf("the API's VM list: %d %+v", code, inv)
	}
	got := inv.VMs[0]
	if got.Connection != "kvm1" || got.VM != "web-1" || got.Host != "kvm1" || got.LastPointID == "" || !got.Covered {
		t.Fatalf("the API lists %+v, want web-1 on host kvm1 with the run's point", got)
	}

	// A backup of web-1 alone is handed to the worker of its host too.
	asked = time.Now()
	var one api.BackupPoint
	if code, _ := srv.Call(token, "POST", "/repositories/default/backups/vm/kvm1/web-1", map[string]any{}, &one); code != http.StatusOK || one.ID == "" {
		t.Fatalf("a backup of web-1 alone through the server: %d %+v\n%s", code, one, srv.Log())
	}
	if ev := waitEvent(t, cat, asked, "kvm1"); !strings.Contains(ev.Message, "web-1") {
		t.Fatalf("the backup of web-1 alone ran: %+v", ev)
	}
	t.Logf("a backup of web-1 alone through the server ran on kvm1: point %s in %s", one.ShortID, time.Since(asked).Round(time.Millisecond))

	log := srv.Log()
	for _, never := range []string{"removed leftover", "cleanup on connection", "could not be refreshed", "qmp.sock"} {
		if strings.Contains(log, never) {
			t.Errorf("the server's log says %q: it opened connection kvm1\n%s", never, log)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Vars["COFFER_STATE_DIR"], "qemu")); !os.IsNotExist(err) {
		t.Errorf("the server's qemu state directory, which opening connection kvm1 makes: %v", err)
	}
}

// bootSmallGuest boots a guest writing self-verifying blocks on an empty
// qcow2 disk of 32 MiB, its sockets and disk in dir.
func bootSmallGuest(t *testing.T, ctx context.Context, dir string) *guestvm.VM {
	t.Helper()
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, "web-1.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return startWritingGuest(ctx, t, img, filepath.Join(dir, "vm"), "0d8f4c52-3b1e-4f6a-9c27-5e4b1a2d3c81", disk)
}

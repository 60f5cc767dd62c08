package restorecmd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// TestInstantRecovery backs up a writing guest, kills it (the disaster),
// runs it again from the backup, kills coffer's NBD server under it (the
// VM pauses, then resumes when `instant serve` is back), commits it onto
// "production" storage while it runs, and checks the guest's disk.
func TestInstantRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	vm := clitest.BootWriters(t, ctx, e.Dir, 1)[0]
	e.Must("init")
	e.Must("backup", "vm", vm.QMPPath)
	if _, _, err := vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
		t.Fatal(err)
	}
	e.Must("backup", "vm", vm.QMPPath) // the point recovered is an incremental
	vm.Kill()

	began := time.Now()
	server := e.Child("instant", "start", "latest", "--reconnect-delay", "1s", "--json")
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	var raw json.RawMessage
	var s api.InstantSession
	if err := json.NewDecoder(out).Decode(&raw); err != nil || json.Unmarshal(raw, &s) != nil || s.Console == "" {
		t.Fatalf("instant start: %s %v", raw, err)
	}
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), s.QMPSocket) })
	pos := clitest.WaitFile(ctx, t, s.Console, 0, "COFFER CHECK OK")
	t.Logf("instant recovery: guest verified its disk read from the backup %.1fs after the command", time.Since(began).Seconds())
	clitest.WaitFile(ctx, t, s.Console, pos, "COFFER WROTE")

	var list []api.InstantSession
	if err := json.Unmarshal([]byte(e.Must("instant", "list", "--json")), &list); err != nil || len(list) != 1 ||
		list[0].State != instant.StateRunning || !list[0].ServerRunning || !list[0].VMRunning {
		t.Fatalf("instant list: %+v %v", list, err)
	}

	// coffer's server dies: the guest's reads of the backup fail after the
	// reconnect delay, and the VM pauses instead of seeing errors.
	cl, err := qmp.Dial(ctx, s.QMPSocket)
	if err != nil {
		t.Fatal(err)
	}
	sub := cl.Subscribe()
	_ = server.Process.Kill()
	_ = server.Wait()
	if _, err := sub.Wait(ctx, "STOP", nil); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := cl.Execute(ctx, "query-status", nil, &st); err != nil || st.Status != "io-error" {
		t.Fatalf("VM status after the server died: %q %v", st.Status, err)
	}
	cl.Close() // one client per monitor: `instant serve` needs it

	reserve := e.Child("instant", "serve", s.ID)
	rout, err := reserve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	reserve.Stderr = os.Stderr
	if err := reserve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reserve.Process.Kill(); _ = reserve.Wait() })
	line, err := bufio.NewReader(rout).ReadString('\n')
	if err != nil || !strings.Contains(line, "resumed") {
		t.Fatalf("instant serve: %q %v", line, err)
	}
	b, _ := os.ReadFile(s.Console)
	clitest.WaitFile(ctx, t, s.Console, len(b), "COFFER WROTE")

	// Commit: the running VM moves to production storage; the server exits.
	prod := filepath.Join(e.Dir, "production")
	e.Must("instant", "commit", s.ID, "--to", prod, "--format", "raw")
	if err := reserve.Wait(); err != nil {
		t.Fatalf("the server did not stop cleanly after the commit: %v", err)
	}
	b, _ = os.ReadFile(s.Console)
	clitest.WaitFile(ctx, t, s.Console, len(b), "COFFER WROTE") // still running, now from production
	if err := json.Unmarshal([]byte(e.Must("instant", "list", "--json")), &list); err != nil || len(list) != 1 ||
		list[0].State != instant.StateCommitted || list[0].ServerRunning || !list[0].VMRunning {
		t.Fatalf("instant list after commit: %+v %v", list, err)
	}
	if _, err := os.Stat(s.Disks[0].Overlay); !os.IsNotExist(err) {
		t.Fatalf("overlay left after commit: %v", err)
	}
	if err := qemu.Quit(ctx, s.QMPSocket); err != nil {
		t.Fatal(err)
	}
	console, _ := os.ReadFile(s.Console)
	for _, bad := range []string{"READ-ERROR", "READ-MISMATCH", "WRITE-ERROR", "FAIL"} {
		if strings.Contains(string(console), bad) {
			t.Fatalf("guest reported %s:\n%s", bad, console)
		}
	}
	f, err := os.Open(filepath.Join(prod, "vda.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	rep, err := guestvm.CheckDisk(f, fi.Size())
	if err != nil || rep.Base != 64 || rep.Written == 0 {
		t.Fatalf("production disk: %+v %v", rep, err)
	}
	e.Must("instant", "discard", s.ID)
	if out := e.Must("instant", "list"); strings.Contains(out, s.ID) {
		t.Fatalf("session still listed after discard:\n%s", out)
	}
}

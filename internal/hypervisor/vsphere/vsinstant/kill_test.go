package vsinstant

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi"
)

const killEnv = "COFFER_VSINSTANT_KILL_CHILD"

// TestAKilledServerLeavesNoMountNorVM runs a recovery in a child process
// (its NFS server, its vCenter session) and SIGKILLs it once the VM runs
// from the export. The VM and the mount stay in the vCenter, and the
// next Cleanup on the same state directory powers the VM off,
// unregisters it, unmounts the export and removes the session's
// directory and journal; a second Cleanup finds nothing.
func TestAKilledServerLeavesNoMountNorVM(t *testing.T) {
	if os.Getenv(killEnv) != "" {
		t.Skip("in the child")
	}
	l := startLab(t)
	state, sess := t.TempDir(), t.TempDir()
	l.mountable(dsName, filepath.Join(sess, "export"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.v")
	cmd.Env = append(os.Environ(), killEnv+"=1", "KILL_URL="+l.url.String(), "KILL_STATE="+state, "KILL_SESSION="+sess)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	running := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "VM-RUNNING") {
			running = true
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if !running {
		t.Fatal("the child ended before the VM ran")
	}
	if !l.vm("app-instant") || !l.datastore(dsName) {
		t.Fatal("the child's VM or mount is not there after the kill")
	}
	left, err := Cleanup(context.Background(), l.client, state)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Kind != "instant-vm" || left[0].Name != "app-instant" || left[1].Kind != "nfs-datastore" || left[1].Name != dsName {
		t.Fatalf("leftovers: %+v", left)
	}
	if l.vm("app-instant") || l.datastore(dsName) {
		t.Fatalf("after the cleanup: VM %v, datastore %v", l.vm("app-instant"), l.datastore(dsName))
	}
	if _, err := os.Stat(sess); !os.IsNotExist(err) {
		t.Errorf("the session's directory outlived the cleanup: %v", err)
	}
	if left, err := Cleanup(context.Background(), l.client, state); err != nil || len(left) != 0 {
		t.Fatalf("a second cleanup: %+v, %v", left, err)
	}
}

// TestKillChild is the child of TestAKilledServerLeavesNoMountNorVM.
func TestKillChild(t *testing.T) {
	if os.Getenv(killEnv) == "" {
		t.Skip("helper process of TestAKilledServerLeavesNoMountNorVM")
	}
	ctx := context.Background()
	u, err := soapURL(os.Getenv("KILL_URL"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		t.Fatal(err)
	}
	sess := os.Getenv("KILL_SESSION")
	s := serveExportIn(t, ctx, sess, "app-instant")
	rec := NewRecord(os.Getenv("KILL_STATE"), "t1")
	rec.Dir = sess
	host, _, _ := strings.Cut(s.addr, ":")
	if err := Start(ctx, c.Client, s.cfg, rec, Options{NFSHost: host, NFSPath: "/", Datastore: dsName, Name: "app-instant"}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("VM-RUNNING")
	<-ctx.Done() // never: the parent kills this process
}

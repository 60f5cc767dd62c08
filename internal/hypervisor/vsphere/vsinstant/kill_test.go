package vsinstant

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestAKilledServerLeavesNoMountNorVM runs a recovery in a child process
// (its NFS server, its vCenter session) and SIGKILLs it once the VM runs
// from the export. The VM and the mount stay in the vCenter, and the
// next Cleanup on the same state directory powers the VM off,
// unregisters it, unmounts the export and removes the session's
// directory and journal; a second Cleanup finds nothing.
func TestAKilledServerLeavesNoMountNorVM(t *testing.T) {
	l := startLab(t)
	state, sess := t.TempDir(), t.TempDir()
	l.mountable(dsName, filepath.Join(sess, "export"))
	testutil.KillAtPoint(t, "TestKillChild", "KILL_URL="+l.url.String(), "KILL_STATE="+state, "KILL_SESSION="+sess)
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
	testutil.KillChild(t)
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
	testutil.KillPoint()
}

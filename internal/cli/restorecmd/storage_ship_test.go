package restorecmd_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// A kept btrfs snapshot is shipped by `storage-snapshots ship` to the
// provider's ship-to (a second btrfs), and `storage-snapshots restore
// --from` brings the VM's disk back from the shipped copy, as it was in
// the snapshot; --from a directory that is no provider's ship-to is
// refused.
func TestStorageSnapshotsShipAndRestoreFromTheCopy(t *testing.T) {
	testutil.RequireBinary(t, "btrfs")
	mnt := testutil.MountLoopFS(t, "btrfs", 256<<20, "-q")
	shipTo := filepath.Join(testutil.MountLoopFS(t, "btrfs", 256<<20, "-q"), "lab")
	root := filepath.Join(mnt, "vms")
	if out, err := exec.Command("btrfs", "subvolume", "create", root).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	shipAndRestore(t, "btrfs", root, shipTo)
}

// The same with a reflink provider: its kept snapshot goes to a second
// XFS with reflink, and the VM's disk comes back from the copy.
func TestReflinkStorageSnapshotsShipAndRestoreFromTheCopy(t *testing.T) {
	testutil.RequireBinary(t, "mkfs.xfs")
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	shipTo := filepath.Join(testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1"), "lab")
	root := filepath.Join(mnt, "vms")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	shipAndRestore(t, "reflink", root, shipTo)
}

func shipAndRestore(t *testing.T, kind, root, shipTo string) {
	e := clitest.NewEnv(t)
	state := t.TempDir()
	e.Vars["COFFER_STATE_DIR"] = state
	disk := filepath.Join(root, "vda.raw")
	then := bytes.Repeat([]byte("shipped!"), 1<<20)
	if err := os.WriteFile(disk, then, 0o600); err != nil {
		t.Fatal(err)
	}
	const label = "coffer-job3-vms-1"
	d := hypervisor.DiskInfo{Name: "vda.raw", Path: disk, Format: "raw", Size: int64(len(then)), Datastore: root}
	ss, err := storagesnap.Create(context.Background(), policy.StorageProvider{Name: "sub", Kind: kind}, root, state, label, []hypervisor.DiskInfo{d})
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.(hypervisor.StorageKeeper).Keep(context.Background(), hypervisor.KeptSnapshot{Policy: "zdb", Connection: "lab",
		VMs: []hypervisor.KeptVM{{VMRef: hypervisor.VMRef{Name: "web-1"}, Disks: []hypervisor.DiskInfo{d}}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(disk, bytes.Repeat([]byte("changed!"), 1<<20), 0o600); err != nil { // production goes on
		t.Fatal(err)
	}
	e.Config("connections: [{name: lab, kind: fake, options: {vms: 1}}]\n" +
		"storage-snapshots: [{name: sub, kind: " + kind + ", connections: [lab], datastores: [" + root + "], ship-to: " + shipTo + "}]\n")

	got := clitest.Decode[api.StorageShipment](t, e.Must("storage-snapshots", "ship", "--json"))
	if len(got.Shipped) != 1 || got.Shipped[0].Label != label || got.Shipped[0].Parent != "" || got.Shipped[0].Bytes < int64(len(then)) {
		t.Fatalf("ship: %+v", got)
	}
	if out := e.Must("storage-snapshots", "ship"); !strings.Contains(out, "nothing new to ship") {
		t.Fatalf("a second shipment: %s", out)
	}
	target := t.TempDir()
	e.Must("storage-snapshots", "restore", label, "--vm", "web-1", "--target", target, "--from", shipTo)
	if b, err := os.ReadFile(filepath.Join(target, "vda.raw")); err != nil || !bytes.Equal(b, then) {
		t.Fatalf("the disk restored from the shipped copy is not the snapshot's (%v)", err)
	}
	out := e.Expect(command.ExitUsage, "storage-snapshots", "restore", label, "--vm", "web-1", "--target", t.TempDir(), "--from", state)
	if !strings.Contains(out, "is no storage-snapshots provider's ship-to") {
		t.Fatalf("--from a directory that is no ship-to: %s", out)
	}
}

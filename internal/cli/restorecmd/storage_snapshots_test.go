package restorecmd_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/storagesnap/storagesnaptest"
)

// A storage snapshot a policy kept (made here as the engine makes it, on
// a loop-mounted XFS with reflinks) is listed by `storage-snapshots` and
// below `snapshots`, restored by cloning with the disk as it was when the
// snapshot was taken (production has changed since), refused over an
// existing file, and deleted by `forget`.
func TestStorageSnapshotsKeptRestoreAndForget(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	state := t.TempDir()
	e.Vars["COFFER_STATE_DIR"] = state
	const label = "coffer-job7-vms-42"
	k := storagesnaptest.Keep(t, state, label, "zdb", 7, 8<<20)
	mnt, disk, then := k.Mnt, k.Disk, k.Then

	kept := clitest.Decode[[]api.StorageSnapshot](t, e.Must("storage-snapshots", "--json"))
	if len(kept) != 1 || kept[0].Label != label || kept[0].Policy != "zdb" || kept[0].JobID != 7 || kept[0].Kind != "reflink" || kept[0].SnapshotMode != "crash-consistent" ||
		len(kept[0].VMs) != 1 || kept[0].VMs[0].VM != "web-1" || kept[0].VMs[0].Disks[0] != disk {
		t.Fatalf("storage-snapshots: %+v", kept)
	}
	// No policy zdb is configured: no run will delete the snapshot, so
	// the list says it is orphaned and how to delete it.
	if !strings.Contains(kept[0].Orphaned, "policy zdb is no longer in the configuration") {
		t.Fatalf("orphaned: %q", kept[0].Orphaned)
	}
	if out := e.Must("storage-snapshots"); !strings.Contains(out, "zdb (orphaned)") || !strings.Contains(out, "coffer storage-snapshots forget "+label) {
		t.Fatalf("storage-snapshots does not mark the orphan:\n%s", out)
	}
	conf := "connections: [{name: lab, kind: fake, options: {vms: 1}}, {name: lab2, kind: fake, options: {vms: 1}}]\n" +
		"storage-snapshots: [{name: xfs, kind: reflink, connections: [lab], datastores: [" + mnt + "]}]\n"
	for _, c := range []struct{ policies, want string }{
		{"policies: [{name: zdb, connection: lab}]\n", ""}, // its next run applies its retention
		{"policies: [{name: zdb, connection: lab2}]\n", "policy zdb no longer runs on connection lab"},
	} {
		if err := os.WriteFile(e.Vars["COFFER_CONFIG"], []byte(conf+c.policies), 0o600); err != nil {
			t.Fatal(err)
		}
		got := clitest.Decode[[]api.StorageSnapshot](t, e.Must("storage-snapshots", "--json"))
		if len(got) != 1 || !strings.HasPrefix(got[0].Orphaned, c.want) || (c.want == "") != (got[0].Orphaned == "") {
			t.Fatalf("with %s: %+v", c.policies, got)
		}
	}
	if none := clitest.Decode[[]api.StorageSnapshot](t, e.Must("storage-snapshots", "--vm", "db-1", "--json")); len(none) != 0 {
		t.Fatalf("storage-snapshots --vm db-1: %+v", none)
	}
	if out := e.Must("snapshots"); !strings.Contains(out, "Storage snapshots kept") || !strings.Contains(out, label) || !strings.Contains(out, "storage") {
		t.Fatalf("snapshots does not list the kept storage snapshot:\n%s", out)
	}

	target := filepath.Join(mnt, "restored")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	res := clitest.Decode[api.StorageRestore](t, e.Must("storage-snapshots", "restore", label, "--vm", "web-1", "--target", target, "--json"))
	if len(res.Disks) != 1 || res.Disks[0].Method != "cloned" || res.Disks[0].Target != filepath.Join(target, "web-1.raw") {
		t.Fatalf("restore: %+v, want web-1.raw cloned", res)
	}
	if got, _ := os.ReadFile(res.Disks[0].Target); !bytes.Equal(got, then) {
		t.Fatal("the restored disk is not the disk as it was at the snapshot")
	}
	if out := e.Expect(command.ExitUsage, "storage-snapshots", "restore", label, "--vm", "web-1", "--target", target); !strings.Contains(out, "--overwrite") {
		t.Fatalf("restore over an existing disk: %s", out)
	}
	e.Expect(command.ExitNoRepo, "storage-snapshots", "restore", label, "--vm", "db-1", "--target", target)
	e.Expect(command.ExitNoRepo, "storage-snapshots", "restore", "coffer-nothing", "--vm", "web-1", "--target", target)

	// Onto the original: only confirmed, and only while no QEMU holds the
	// disk; then the production file is the snapshot's again, its mode
	// kept.
	if out := e.Expect(command.ExitUsage, "storage-snapshots", "restore", label, "--vm", "web-1", "--onto-original"); !strings.Contains(out, "--yes-overwrite-original") {
		t.Fatalf("onto the original without confirmation: %s", out)
	}
	if err := os.Chmod(disk, 0o640); err != nil {
		t.Fatal(err)
	}
	holder := holdImage(t, disk)
	if out := e.Expect(command.ExitUsage, "storage-snapshots", "restore", label, "--vm", "web-1", "--onto-original", "--yes-overwrite-original"); !strings.Contains(out, "shut the VM off") {
		t.Fatalf("onto a disk QEMU holds: %s", out)
	}
	holder()
	orig := clitest.Decode[api.StorageRestore](t, e.Must("storage-snapshots", "restore", label, "--vm", "web-1", "--onto-original", "--yes-overwrite-original", "--json"))
	if len(orig.Disks) != 1 || orig.Disks[0].Target != disk || orig.Disks[0].Method != "cloned" {
		t.Fatalf("onto the original: %+v", orig)
	}
	if got, _ := os.ReadFile(disk); !bytes.Equal(got, then) {
		t.Fatal("the original disk is not the snapshot's again")
	}
	if fi, err := os.Stat(disk); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("the restored original's mode: %v %v, want 0640", fi.Mode(), err)
	}

	e.Must("storage-snapshots", "forget", label)
	if left := clitest.Decode[[]api.StorageSnapshot](t, e.Must("storage-snapshots", "--json")); len(left) != 0 {
		t.Fatalf("after forget: %+v", left)
	}
	if _, err := os.Stat(filepath.Join(mnt, storagesnap.SnapDir, label)); !os.IsNotExist(err) {
		t.Fatalf("the snapshot's files are still there: %v", err)
	}
	e.Expect(command.ExitNoRepo, "storage-snapshots", "forget", label)
	if got, _ := os.ReadFile(res.Disks[0].Target); !bytes.Equal(got, then) {
		t.Fatal("deleting the snapshot changed the restored disk")
	}
}

// holdImage opens a disk image in qemu-io, which holds QEMU's image locks
// on it as a running VM's QEMU does, and returns once it has the image
// open (it answered a command); the returned function lets it go.
func holdImage(t *testing.T, path string) func() {
	t.Helper()
	cmd := exec.Command("qemu-io", "-f", "raw", path)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(in, "length\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, "MiB") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("qemu-io did not open %s: %q %v", path, line, err)
	}
	release := func() { in.Close(); cmd.Wait() }
	t.Cleanup(release)
	return release
}

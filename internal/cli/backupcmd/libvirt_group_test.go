package backupcmd_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestLibvirtPoolAsAGroup: `group: datastore` on a libvirt storage pool
// whose directory is on XFS with reflinks. The domain is held while the
// pool's directory is cloned, its libvirt snapshot released at once, and
// its disk read from the clone: a full, then an incremental (libvirt's
// checkpoint gives the change set) equal to the disk at its instant, with
// the newest storage snapshot kept and listed. The pool is named by
// libvirt ("images"), not by its directory, so the provider that covers
// the directory must be found through the pool's disks.
func TestLibvirtPoolAsAGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	// The daemon's QEMU runs as its own user, which must reach the pool
	// through the test's directories (made 0700).
	for dir := mnt; dir != filepath.Dir(dir) && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pool := filepath.Join(mnt, "images")
	g := clitest.StartLibvirtGuestIn(t, ctx, filepath.Join(pool, "web-1"))
	g.Virsh("pool-define-as", "images", "dir", "--target", pool)
	g.Virsh("pool-start", "images")
	at := g.Wait("COFFER READY", 0)

	e := clitest.NewEnv(t)
	e.Must("init")
	state := filepath.Join(e.Dir, "state")
	e.Vars["COFFER_STATE_DIR"] = state
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - {name: lv, kind: libvirt, options: {uri: "%s", state-dir: %s}}
storage-snapshots:
  - {name: xfs, kind: reflink, connections: [lv], datastores: [%s]}
policies:
  - {name: pool, connection: lv, group: datastore, keep-storage-snapshots: 1}
`, state, g.D.URI, filepath.Join(g.D.Dir, "st"), mnt))
	if vms := clitest.VMsJSON(t, e); len(vms) != 1 || len(vms[0].Datastores) != 1 || vms[0].Datastores[0] != "images" {
		t.Fatalf("vms: %+v", vms)
	}
	if out := e.Must("policy", "check"); strings.Contains(out, "no storage-snapshots provider covers") {
		t.Fatalf("policy check does not find the pool's provider:\n%s", out)
	}
	run := func(wantMode string) api.VMTask {
		t.Helper()
		j := clitest.MustJSON[api.Job](t, e, "run", "pool")
		if j.Status != "success" || len(j.Tasks) != 1 || j.Tasks[0].Mode != wantMode {
			t.Fatalf("run pool: %+v", j)
		}
		shown := clitest.MustJSON[api.Job](t, e, "job", "show", fmt.Sprint(j.ID))
		grouped := false
		for _, ev := range shown.Events {
			grouped = grouped || ev.Kind == "group-snapshot"
		}
		if !grouped {
			t.Fatalf("job %d was not read from a storage snapshot: %+v", j.ID, shown.Events)
		}
		return j.Tasks[0]
	}
	full := run("full")
	g.Wait("COFFER WROTE", at)
	g.Virsh("suspend", "web-1")
	truth := g.Image(t, filepath.Join(e.Dir, "truth.raw"))
	inc := run("incremental")
	g.Virsh("resume", "web-1")
	if inc.ReadBytes >= full.ReadBytes {
		t.Fatalf("the incremental read %d bytes, its full %d", inc.ReadBytes, full.ReadBytes)
	}
	restored := filepath.Join(e.Dir, "restored.raw")
	e.Must("restore", inc.PointID, "--to", restored)
	if got, _ := os.ReadFile(restored); !bytes.Equal(got, truth) {
		t.Fatal("the incremental read from the pool's storage snapshot differs from the disk at its instant")
	}
	kept := clitest.MustJSON[[]api.StorageSnapshot](t, e, "storage-snapshots")
	if len(kept) != 1 || kept[0].Policy != "pool" || kept[0].Datastore != mnt || len(kept[0].VMs) != 1 || kept[0].VMs[0].VM != "web-1" {
		t.Fatalf("kept storage snapshots: %+v", kept)
	}
}

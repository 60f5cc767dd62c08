package restorecmd_test

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/instant/nfsserve"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// vsInstant is a vSphere point's instant recovery on a vCenter
// simulator, driven through coffer's command line.
//
// vcsim mounts nothing: its CreateNasDatastore takes the datastore's
// name as a directory of the simulator's working directory (this test's
// process). The test works in a directory of its own and links the name
// coffer gives the datastore (coffer-instant-ID) to the session's export
// directory, so that what vSphere reads and writes there (the disks'
// descriptors, the VM's .vmx) is the export's. The export itself is served
// over NFS by the coffer process and read by nothing here: the NFS tests
// of internal/instant/nfsserve read it with a client library.
type vsInstant struct {
	t     *testing.T
	e     *clitest.Env
	lab   *clitest.VCLab
	point string // the point's short ID: the session's
}

func newVSInstant(t *testing.T) *vsInstant {
	e := clitest.NewEnv(t)
	lab := clitest.NewVCLab(t, vclab.Start(t, 1, 0))
	e.Must("init")
	lab.BackUp(e, "app-01", "")
	pts := clitest.SnapshotsJSON(t, e)
	if len(pts) != 1 {
		t.Fatalf("%d points", len(pts))
	}
	v := &vsInstant{t: t, e: e, lab: lab, point: pts[0].ID[:8]}
	work := t.TempDir()
	t.Chdir(work)
	export := filepath.Join(e.Vars["COFFER_STATE_DIR"], "instant", v.point, "export")
	if err := os.Symlink(export, filepath.Join(work, "coffer-instant-"+v.point)); err != nil {
		t.Fatal(err)
	}
	return v
}

// start runs `coffer instant start` in a process of its own, serving on
// loopback, and returns the session it printed.
func (v *vsInstant) start() (*exec.Cmd, api.InstantSession) {
	v.t.Helper()
	return v.startOn("127.0.0.1:0")
}

// startOn is start with the NFS server listening on listen.
func (v *vsInstant) startOn(listen string) (*exec.Cmd, api.InstantSession) {
	v.t.Helper()
	host, _, _ := net.SplitHostPort(listen)
	server := v.e.Child("instant", "start", "latest", "--nfs-listen", listen, "--json")
	out, err := server.StdoutPipe()
	if err != nil {
		v.t.Fatal(err)
	}
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	var s api.InstantSession
	if err := json.NewDecoder(out).Decode(&s); err != nil {
		v.t.Fatalf("instant start: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if s.Platform != "vsphere" || s.Domain != "app-01-instant" || s.Connection != "vc" || s.ID != v.point ||
		s.Datastore != "coffer-instant-"+v.point || s.NFSAddress != host || len(s.Disks) != 1 {
		v.t.Fatalf("instant start: %+v", s)
	}
	return server, s
}

// vm is the recovered VM's power state and datastores ("" if it is not
// registered).
func (v *vsInstant) vm() (types.VirtualMachinePowerState, []string) {
	v.t.Helper()
	var vms []mo.VirtualMachine
	v.lab.Retrieve(v.t.Context(), "VirtualMachine", []string{"name", "runtime.powerState", "datastore"}, &vms)
	for _, m := range vms {
		if m.Name == "app-01-instant" {
			var dss []string
			for _, d := range m.Datastore {
				dss = append(dss, v.datastoreName(d.Value))
			}
			return m.Runtime.PowerState, dss
		}
	}
	return "", nil
}

func (v *vsInstant) datastoreName(ref string) string {
	var dss []mo.Datastore
	v.lab.Retrieve(v.t.Context(), "Datastore", []string{"name"}, &dss)
	for _, d := range dss {
		if d.Self.Value == ref {
			return d.Name
		}
	}
	return ""
}

// mounted says whether the export's datastore exists.
func (v *vsInstant) mounted() bool {
	var dss []mo.Datastore
	v.lab.Retrieve(v.t.Context(), "Datastore", []string{"name"}, &dss)
	for _, d := range dss {
		if d.Name == "coffer-instant-"+v.point {
			return true
		}
	}
	return false
}

func (v *vsInstant) sessions() []api.InstantSession {
	return clitest.Decode[[]api.InstantSession](v.t, v.e.Must("instant", "list", "--json"))
}

// TestVSphereInstantStartListCommit: `instant start` of a vSphere point
// mounts the export as a datastore, registers the VM on it and powers it
// on; `instant list` shows the session running; `instant commit --to DS`
// moves the VM to datastore DS, unmounts the export and stops the serving
// process; `instant discard` then leaves the committed VM and drops the
// session.
func TestVSphereInstantStartListCommit(t *testing.T) {
	v := newVSInstant(t)
	server, s := v.start()
	state, dss := v.vm()
	if state != types.VirtualMachinePowerStatePoweredOn || len(dss) != 1 || dss[0] != s.Datastore || !v.mounted() {
		t.Fatalf("after start: VM %q on %v, export mounted %v", state, dss, v.mounted())
	}
	if l := v.sessions(); len(l) != 1 || l[0].ID != s.ID || l[0].State != "running" || !l[0].VMRunning || !l[0].ServerRunning {
		t.Fatalf("instant list: %+v", l)
	}
	var local []mo.Datastore
	v.lab.Retrieve(t.Context(), "Datastore", []string{"name"}, &local)
	target := local[0].Name
	c := clitest.Decode[api.InstantSession](t, v.e.Must("instant", "commit", s.ID, "--to", target, "--json"))
	if c.State != "committed" || len(c.Targets) != 1 || c.Targets[0] != target {
		t.Fatalf("instant commit: %+v", c)
	}
	if err := server.Wait(); err != nil {
		t.Fatalf("the serving process after the commit: %v", err)
	}
	state, dss = v.vm()
	if state != types.VirtualMachinePowerStatePoweredOn || len(dss) != 1 || dss[0] != target || v.mounted() {
		t.Fatalf("after commit: VM %q on %v, export mounted %v", state, dss, v.mounted())
	}
	v.e.Must("instant", "discard", s.ID)
	if state, _ := v.vm(); state != types.VirtualMachinePowerStatePoweredOn || len(v.sessions()) != 0 {
		t.Fatalf("after discarding the committed session: VM %q, sessions %+v", state, v.sessions())
	}
}

// TestVSphereInstantDiscard: `instant discard` powers the VM off,
// unregisters it, unmounts the export, stops the serving process and
// removes the session's directory (export and overlays).
//
// It serves on port 2049, the port ESXi mounts, of an address of its own
// (127.0.0.2): the portmapper on port 111 there, which ESXi asks first,
// gives a client the export's port, where the VM's disk descriptor reads;
// after the discard nothing answers on port 111.
func TestVSphereInstantDiscard(t *testing.T) {
	testutil.RequireRoot(t) // port 111
	v := newVSInstant(t)
	server, s := v.startOn("127.0.0.2:2049")
	port := getport(t, "127.0.0.2")
	if port != 2049 {
		t.Fatalf("the portmapper gives MOUNT v3 over TCP at %d, not 2049", port)
	}
	if desc := readExported(t, "127.0.0.2:2049", nfsserve.DescriptorName(s.Domain, 0)); !strings.Contains(desc, "app-01-instant_0-flat.vmdk") {
		t.Fatalf("the descriptor served: %q", desc)
	}
	v.e.Must("instant", "discard", s.ID)
	if err := server.Wait(); err != nil {
		t.Fatalf("the serving process after the discard: %v", err)
	}
	if state, _ := v.vm(); state != "" || v.mounted() {
		t.Fatalf("after discard: VM %q, export mounted %v", state, v.mounted())
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) || len(v.sessions()) != 0 {
		t.Fatalf("after discard: session directory %v, sessions %+v", err, v.sessions())
	}
	if c, err := net.Dial("tcp", "127.0.0.2:111"); err == nil {
		c.Close()
		t.Fatal("after discard, the portmapper still answers")
	}
}

// TestVSphereInstantKilledCofferCleanedUp: the coffer process serving a
// vSphere VM is killed (SIGKILL); the VM and the mount stay behind until
// the next coffer that opens the connection (here a backup run) cleans up
// from the journal: the VM is powered off and unregistered, the datastore
// unmounted, and the session is gone.
func TestVSphereInstantKilledCofferCleanedUp(t *testing.T) {
	v := newVSInstant(t)
	server, s := v.start()
	_ = server.Process.Kill()
	_ = server.Wait()
	if state, _ := v.vm(); state != types.VirtualMachinePowerStatePoweredOn || !v.mounted() {
		t.Fatalf("after the kill: VM %q, export mounted %v", state, v.mounted())
	}
	v.e.Must("run", "p")
	if state, _ := v.vm(); state != "" || v.mounted() {
		t.Fatalf("after the cleanup: VM %q, export mounted %v", state, v.mounted())
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) || len(v.sessions()) != 0 {
		t.Fatalf("after the cleanup: session directory %v, sessions %+v", err, v.sessions())
	}
}

// TestVSphereInstantNeedsAMountableAddress: an export listening on an
// unspecified address (":0") gives the host nothing to mount: without
// --nfs-address, start is refused before the vCenter is asked anything,
// and leaves no session.
func TestVSphereInstantNeedsAMountableAddress(t *testing.T) {
	v := newVSInstant(t)
	code, _, errOut := v.e.Run("instant", "start", "latest", "--nfs-listen", ":0")
	if code == 0 || !strings.Contains(errOut, "name the address the ESXi host mounts it from") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if state, _ := v.vm(); state != "" || v.mounted() || len(v.sessions()) != 0 {
		t.Fatalf("after the refused start: VM %q, export mounted %v, sessions %+v", state, v.mounted(), v.sessions())
	}
}

// TestVSphereInstantDiscardAfterAKill: a session whose serving coffer was
// killed is discarded by hand before any cleanup: the VM is powered off
// and unregistered, the export unmounted, the session gone.
func TestVSphereInstantDiscardAfterAKill(t *testing.T) {
	v := newVSInstant(t)
	server, s := v.start()
	_ = server.Process.Kill()
	_ = server.Wait()
	v.e.Must("instant", "discard", s.ID)
	if state, _ := v.vm(); state != "" || v.mounted() || len(v.sessions()) != 0 {
		t.Fatalf("after discard: VM %q, export mounted %v, sessions %+v", state, v.mounted(), v.sessions())
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("after discard: session directory %v", err)
	}
}

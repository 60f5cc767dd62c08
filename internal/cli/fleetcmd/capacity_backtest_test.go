package fleetcmd_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// capacityChunk is the repository's chunk size: the writes below each
// replace whole chunks.
const capacityChunk = 256 << 10

// startDiskDaemon serves a new qcow2 image of size bytes through a
// qemu-storage-daemon, which the qemu connector protects like a VM named
// after its monitor's socket, and returns a client of its writable NBD
// export.
func startDiskDaemon(t *testing.T, dir, name string, size int64) *nbd.Conn {
	t.Helper()
	bin := testutil.RequireBinary(t, "qemu-storage-daemon")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	img, sock, pid := filepath.Join(dir, name+".qcow2"), filepath.Join(dir, name+".nbd"), filepath.Join(dir, name+".pid")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", img, fmt.Sprint(size)).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// --daemonize returns once the sockets listen.
	out, err := exec.Command(bin, "--blockdev", "driver=file,node-name=file0,filename="+img,
		"--blockdev", "driver=qcow2,node-name=disk0,file=file0",
		"--nbd-server", "addr.type=unix,addr.path="+sock,
		"--export", "type=nbd,id=vda,node-name=disk0,name=vda,writable=on",
		"--chardev", "socket,id=coffer,path="+filepath.Join(dir, name+".qmp")+",server=on,wait=off", "--monitor", "chardev=coffer",
		"--pidfile", pid, "--daemonize").CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-storage-daemon: %v %s", err, out)
	}
	t.Cleanup(func() { testutil.KillPIDFile(t, pid) })
	c, err := nbd.Dial(context.Background(), "unix", sock, nbd.ClientOptions{Export: "vda"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// writeChunks gives chunks [from, to) of the disk new content that
// compresses to about half: random bytes, then zeros.
func writeChunks(t *testing.T, c *nbd.Conn, from, to int) {
	t.Helper()
	buf := make([]byte, capacityChunk)
	for i := from; i < to; i++ {
		_, _ = rand.Read(buf[:capacityChunk/2])
		if _, err := c.WriteAt(buf, int64(i)*capacityChunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The capacity forecast held to a real repository: disks served by
// qemu-storage-daemon backed up by a policy that keeps the last 3
// points, run 6 times with 2 chunks of each disk rewritten before every
// run after the first, then collected by gc. The forecast learns used
// bytes, change per run and reduction from the catalog's record of the
// runs, and its steady state must match what the repository's directory
// holds within 1%: the model leaves out only the manifests, the key
// files and the index's bloom filters, block tables and footers (some
// KiB against 20 MiB of data, 0.1%), and its reduction is the runs'
// mean, which chunks of one kind of content barely spread.
func TestCapacityForecastHeldToARepository(t *testing.T) {
	e := clitest.NewEnv(t)
	const vms, disk, used, perRun = 3, 32 << 20, 48, 2 // used and perRun in chunks
	var disks []*nbd.Conn
	for i := range vms {
		c := startDiskDaemon(t, e.Dir, fmt.Sprintf("vm-%d", i+1), disk)
		writeChunks(t, c, 0, used)
		disks = append(disks, c)
	}
	e.Must("init")
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - name: kvm
    kind: qemu
    options: {sockets: ["%s"], host: kvm}
policies:
  - name: nightly
    connection: kvm
    schedule: "0 22 * * *"
    retention: {keep-last: 3}
`, filepath.Join(e.Dir, "state"), filepath.Join(e.Dir, "vm-*.qmp")))
	for run := range 6 {
		if run > 0 {
			for _, c := range disks {
				writeChunks(t, c, run*perRun, (run+1)*perRun)
			}
		}
		var job api.Job
		if err := json.Unmarshal([]byte(e.Must("run", "nightly", "--json")), &job); err != nil || job.Status != "success" || len(job.Tasks) != vms {
			t.Fatalf("run %d: %+v %v", run+1, job, err)
		}
	}
	if n := len(clitest.SnapshotsJSON(t, e)); n != 3*vms {
		t.Fatalf("%d points after the retention, want %d", n, 3*vms)
	}
	e.Must("gc", "--repack-threshold", "0.000001")
	actual := clitest.DirSize(t, e.Repo)

	var doc api.Plan
	if err := json.Unmarshal([]byte(e.Must("plan", "nightly", "--json")), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Capacity
	// What the forecast learnt is what the test wrote.
	if c.UsedBytes != vms*used*capacityChunk || c.ChangePerRunBytes != vms*perRun*capacityChunk || c.Reduction < 0.45 || c.Reduction > 0.55 {
		t.Errorf("used %d bytes, %d a run, reduction %.3f; wrote %d and %d, half compressible",
			c.UsedBytes, c.ChangePerRunBytes, c.Reduction, vms*used*capacityChunk, vms*perRun*capacityChunk)
	}
	if len(c.Assumptions) != 0 || c.PeakPoints != 3 || c.PeakBytes != c.LowBytes {
		t.Errorf("assumed %v; %d points, peak %d low %d", c.Assumptions, c.PeakPoints, c.PeakBytes, c.LowBytes)
	}
	off := float64(c.PeakBytes)/float64(actual) - 1
	t.Logf("forecast %d bytes (%d data, %d metadata), the repository %d: %+.2f%%", c.PeakBytes, c.PeakDataBytes, c.PeakMetadataBytes, actual, 100*off)
	if math.Abs(off) > 0.01 {
		t.Errorf("forecast %d bytes, the repository holds %d: %+.2f%%, beyond 1%%", c.PeakBytes, actual, 100*off)
	}
	if r := c.Repository; r.Name != "default" || r.FreeBytes <= 0 || len(r.Policies) != 1 || r.FullAt != nil {
		t.Errorf("repository %+v", r)
	}
}

package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/iolatency"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// scriptedLatency is a latency source whose counters grow by one
// scripted interval per read: congested (50 ms an operation) until the
// backup has read calmAfter bytes, calm (1 ms) from then on. Tied to the
// bytes read, not to its reads, so that the congestion spans reading
// however long the snapshot before it takes on a loaded machine.
type scriptedLatency struct {
	read      *atomic.Int64
	calmAfter int64
	mu        sync.Mutex
	c         iolatency.Counters
}

func (s *scriptedLatency) Name() string { return "scripted array" }

func (s *scriptedLatency) Read(context.Context) (iolatency.Counters, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	per := time.Millisecond
	if s.read.Load() < s.calmAfter {
		per = 50 * time.Millisecond
	}
	s.c.Ops += 10
	s.c.Time += 10 * per
	return s.c, nil
}

// countingLimiter counts the bytes its limiter let a backup read (once
// granted: the backup asks for several MiB at once when it starts).
type countingLimiter struct {
	backup.RateLimiter
	read *atomic.Int64
}

func (c countingLimiter) WaitN(ctx context.Context, n int) error {
	if err := c.RateLimiter.WaitN(ctx, n); err != nil {
		return err
	}
	c.read.Add(int64(n))
	return nil
}

// startDaemon runs a qemu-storage-daemon (protected like a VM by the
// QEMU connector) whose one disk holds size bytes of data, in dir.
func startDaemon(t *testing.T, dir string, size int64) string {
	t.Helper()
	bin := testutil.RequireBinary(t, "qemu-storage-daemon")
	img, sock, pid := filepath.Join(dir, "d1.qcow2"), filepath.Join(dir, "d1.qmp"), filepath.Join(dir, "d1.pid")
	for _, c := range [][]string{
		{testutil.RequireBinary(t, "qemu-img"), "create", "-q", "-f", "qcow2", img, fmt.Sprint(size)},
		{testutil.RequireBinary(t, "qemu-io"), "-f", "qcow2", "-c", fmt.Sprintf("write -P 0x5a 0 %d", size), img},
		{bin, "--blockdev", "driver=file,node-name=file0,filename=" + img, "--blockdev", "driver=qcow2,node-name=disk0,file=file0",
			"--nbd-server", "addr.type=unix,addr.path=" + filepath.Join(dir, "d1.nbd"),
			"--export", "type=nbd,id=vda,node-name=disk0,name=vda,writable=on",
			"--chardev", "socket,id=coffer,path=" + sock + ",server=on,wait=off", "--monitor", "chardev=coffer",
			"--pidfile", pid, "--daemonize"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	t.Cleanup(func() { testutil.KillPIDFile(t, pid) })
	return sock
}

// tmpfsDir is a directory of the test's own on a file system without a
// block device (/dev/shm), removed at the end.
func tmpfsDir(t *testing.T) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		if testutil.Strict() {
			t.Fatalf("/dev/shm is not a tmpfs (%v)", err)
		}
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "coffer-throttle-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestLatencyThrottleSlowsARealBackup backs up a real QEMU disk (a
// storage daemon's) through the engine with its datastore under latency
// control and a latency source above the threshold: the task's read
// bucket is slowed (the task log names the rate its limiter was set to,
// below the task's own rate and not below the floor), then released when
// the latency falls, and the point is whole.
//
// The datastore is a tmpfs directory: a block device's latency is real
// and this machine's to decide (a loaded CI run's disk can stay above
// 30 ms for seconds), while the test needs the latency it scripts. The
// device source has a test of its own (iolatency).
func TestLatencyThrottleSlowsARealBackup(t *testing.T) {
	dir := tmpfsDir(t)
	const size = 6 << 20
	sock := startDaemon(t, dir, size)
	conn, err := qemu.New(qemu.Config{Sockets: []string{sock}, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	const taskRate, floor = 2 << 20, 256 << 10
	cfg := &policy.Config{
		Connections: []policy.Connection{{Name: "lab", Kind: "qemu"}},
		// 6 MiB at 2 MiB/s takes at least 2 s after the first second's
		// burst: the 20 ms monitor steps many times meanwhile.
		Limits: policy.Limits{TaskRate: taskRate},
		LatencyControl: policy.LatencyControls{{Datastores: []string{dir}, Threshold: policy.Duration(30 * time.Millisecond),
			MinRate: floor, Interval: policy.Duration(20 * time.Millisecond)}},
	}
	// Congested until half the disk is read: 3 MiB, which takes at least
	// half a second after the 2 MiB burst; the release then comes while
	// the other 3 MiB are read, which takes at least a second more.
	var read atomic.Int64
	script := &scriptedLatency{read: &read, calmAfter: size / 2}
	var asked []string
	var nice int
	cat := enginetest.NewCatalog()
	r := newRepo(t)
	eng, err := New(context.Background(), Options{Config: cfg, Catalog: cat, Connectors: map[string]hypervisor.Connector{"lab": conn},
		OpenRepository: func(context.Context, string) (*repo.Repository, error) { return r, nil }, FlushInterval: 5 * time.Millisecond,
		Runner: func(ctx context.Context, w *repo.Writer, conn hypervisor.Connector, req backup.VMRequest, o backup.Options) (*repo.Point, error) {
			o.Limiter = countingLimiter{o.Limiter, &read}
			nice = o.Nice
			return backup.BackupVM(ctx, w, conn, req, o)
		},
		LatencySources: func(connection, datastore string) []iolatency.Source {
			asked = append(asked, connection+" "+datastore)
			return []iolatency.Source{script}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	p := testPolicy("nightly")
	p.Shares = policy.Shares(iolatency.SharesLow)
	res, err := eng.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 1 || res.Tasks[0].BytesRead < size {
		t.Fatalf("job %s (%s), tasks %+v", res.Job.Status, res.Job.Error, res.Tasks)
	}
	if len(asked) != 1 || asked[0] != "lab "+dir {
		t.Fatalf("extra sources asked for %v, want the daemon's datastore once", asked)
	}
	events := cat.EventsOf(res.Job.ID, "latency-throttle")
	var slowed, released *catalog.Event
	for i, ev := range events {
		switch {
		case strings.HasPrefix(ev.Message, "reads slowed to"):
			slowed = &events[i]
		case strings.HasPrefix(ev.Message, "reads back to full speed"):
			released = &events[i]
		}
	}
	if slowed == nil || released == nil {
		t.Fatalf("task log lacks the engagement or the release: %+v", events)
	}
	rate, _ := slowed.Fields["rate_bytes_per_second"].(float64)
	if rate <= 0 || rate >= taskRate || rate < floor || slowed.Fields["shares"] != iolatency.SharesLow ||
		slowed.Fields["latency_seconds"].(float64) < 0.030 {
		t.Fatalf("engaged with the read limiter at %.0f bytes/s (task rate %d, floor %d): %+v", rate, taskRate, floor, slowed)
	}
	if !strings.Contains(slowed.Message, "datastore "+dir+" is congested") {
		t.Fatalf("engagement line %q does not name the datastore", slowed.Message)
	}
	if released.Fields["rate_bytes_per_second"].(float64) != 0 || released.Fields["latency_seconds"].(float64) >= 0.030 {
		t.Fatalf("release: %+v", released)
	}
	if n := len(cat.EventsOf(res.Job.ID, "latency-throttle")); n == 0 || !strings.Contains(events[0].Message, "watched through the VMs' disks only") {
		t.Fatalf("the task log does not say the tmpfs datastore has no device: %+v", events)
	}
	if left := eng.Latency(); len(left) != 0 {
		t.Fatalf("datastores still watched after the job: %+v", left)
	}
	for _, ev := range events {
		if strings.Contains(ev.Message, "are on one device") {
			t.Fatalf("a tmpfs datastore is said to share the repository's device: %+v", ev)
		}
	}
	// The pipeline runs behind the VMs at the default niceness, and the
	// task log says so.
	said := false
	for _, ev := range events {
		said = said || (ev.Fields["cpu_nice"] == policy.DefaultCPUNice && strings.Contains(ev.Message, fmt.Sprintf("CPU niceness %d", policy.DefaultCPUNice)))
	}
	if nice != policy.DefaultCPUNice || !said {
		t.Fatalf("the backup ran at niceness %d (want %d); task log: %+v", nice, policy.DefaultCPUNice, events)
	}
}

// TestRepositoryOnTheWatchedDevice: a backup whose repository is on the
// block device of a watched datastore warns in its task log that the
// repository's writes count as the datastore's latency (the benchmark's
// first storage-snapshot run was throttled to its floor by exactly that),
// naming the device.
func TestRepositoryOnTheWatchedDevice(t *testing.T) {
	dir := t.TempDir()
	dev, err := iolatency.DeviceOf(dir)
	if err != nil {
		if testutil.Strict() {
			t.Fatalf("the test directory has no block device: %v", err)
		}
		t.Skip(err)
	}
	r := newRepo(t) // a local repository in a test directory: the same file system
	sock := startDaemon(t, dir, 2<<20)
	conn, err := qemu.New(qemu.Config{Sockets: []string{sock}, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &policy.Config{
		Connections:    []policy.Connection{{Name: "lab", Kind: "qemu"}},
		LatencyControl: policy.LatencyControls{{Datastores: []string{dir}}},
	}
	cat := enginetest.NewCatalog()
	eng, err := New(context.Background(), Options{Config: cfg, Catalog: cat, Connectors: map[string]hypervisor.Connector{"lab": conn},
		OpenRepository: func(context.Context, string) (*repo.Repository, error) { return r, nil }, FlushInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	res, err := eng.Run(context.Background(), testPolicy("nightly"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("job %s (%s)", res.Job.Status, res.Job.Error)
	}
	var warned *catalog.Event
	for _, ev := range cat.EventsOf(res.Job.ID, "latency-throttle") {
		if strings.Contains(ev.Message, "are on one device") {
			warned = &ev
		}
	}
	if warned == nil || warned.Level != "warn" || warned.Fields["device"] != dev.Name || !strings.Contains(warned.Message, "datastore "+dir) {
		t.Fatalf("no warning that the repository shares device %s with datastore %s: %+v", dev.Name, dir, cat.EventsOf(res.Job.ID, "latency-throttle"))
	}
}

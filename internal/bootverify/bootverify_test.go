package bootverify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/ovmf"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// lab is a running boot-mode guest (guestvm's BootMarker, HTTP on
// BootProbePort, a guest agent) and a repository to back it up into.
type lab struct {
	t     *testing.T
	ctx   context.Context
	disk  string
	vm    *guestvm.VM
	admin *qmp.Client
	conn  *qemu.Connector
	ref   hypervisor.VMRef
	repo  *repo.Repository
	store string
	state string
	// efi is where an EFI-booted guest's loader lies on its disk.
	efi *guestvm.EFIBootDisk
}

// How the lab's guest boots.
type labBoot int

const (
	kernelBoot labBoot = iota // QEMU's -kernel: no bootloader
	biosBoot                  // SeaBIOS, the MBR, SYSLINUX (guestvm.BuildBootDisk)
	efiBoot                   // OVMF, the ESP's \EFI\BOOT\BOOTX64.EFI (guestvm.BuildEFIBootDisk)
)

func newLab(t *testing.T, ctx context.Context) *lab { return newLabWith(t, ctx, kernelBoot) }

// newLabWith starts the lab's guest; booted from its disk (biosBoot,
// efiBoot) it goes through the firmware and a bootloader, and mounts its
// root file system from that disk.
func newLabWith(t *testing.T, ctx context.Context, how labBoot) *lab {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := &lab{t: t, ctx: ctx, disk: filepath.Join(dir, "vda.qcow2"), state: filepath.Join(dir, "state"), store: filepath.Join(dir, "repo")}
	format := "qcow2"
	var fw *ovmf.Firmware
	switch how {
	case biosBoot:
		for _, tool := range []string{"syslinux", "mcopy", "mkfs.vfat", "mkfs.ext4", "sfdisk"} {
			testutil.RequireBinary(t, tool)
		}
		l.disk, format = filepath.Join(dir, "vda.raw"), "raw"
		if err := guestvm.BuildBootDisk(ctx, img, l.disk, true); err != nil {
			t.Fatal(err)
		}
	case efiBoot:
		for _, tool := range guestvm.EFIBootDiskTools {
			testutil.RequireBinary(t, tool)
		}
		f := testutil.RequireOVMF(t)
		fw = &f
		l.disk, format = filepath.Join(dir, "vda.raw"), "raw"
		if l.efi, err = guestvm.BuildEFIBootDisk(ctx, img, l.disk, guestvm.BootDiskOptions{Agent: true}); err != nil {
			t.Fatal(err)
		}
	default:
		if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", l.disk, "16M").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	l.vm, err = guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", UUID: "0c3e2a51-3d7b-4a4f-9b0e-5d1f2a3b4c5d", Dir: filepath.Join(dir, "vm"),
		Mode: "boot", GuestAgent: true, DiskBoot: how != kernelBoot, EFI: fw,
		// A NIC of its own, as production VMs have: the test boot keeps it
		// in its PCI slot and puts the probes' restricted network on it.
		Extra: []string{"-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56"}, Disks: []guestvm.Disk{{ID: "vda", Path: l.disk, Format: format, ShareRW: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.vm.Kill)
	if _, err := l.vm.WaitConsole(ctx, guestvm.BootMarker); err != nil {
		t.Fatalf("%v\n%s", err, l.vm.Console())
	}
	if l.admin, err = qmp.Dial(ctx, l.vm.TestQMP); err != nil {
		t.Fatal(err)
	}
	if l.conn, err = qemu.New(qemu.Config{Sockets: []string{l.vm.QMPPath}, StateDir: filepath.Join(l.state, "qemu")}); err != nil {
		t.Fatal(err)
	}
	vms, err := l.conn.Inventory(ctx)
	if err != nil || len(vms) != 1 {
		t.Fatalf("inventory: %v %v", vms, err)
	}
	l.ref = vms[0].VMRef
	st, err := local.Create(l.store)
	if err != nil {
		t.Fatal(err)
	}
	o := repo.InitOptions{Password: []byte(repotest.Password), KDF: repotest.FastKDF}
	if _, err := repo.Init(ctx, st, o); err != nil {
		t.Fatal(err)
	}
	if l.repo, err = repo.Open(ctx, st, []byte(repotest.Password), repo.Options{}); err != nil {
		t.Fatal(err)
	}
	return l
}

// point backs the guest up after setting its disk's boot behaviour (0:
// boots well); the running guest read it at its own boot and ignores it.
func (l *lab) point(behaviour byte) *repo.Point {
	l.t.Helper()
	if behaviour != 0 {
		l.write(fmt.Sprintf("write -P 0x%02x 0 512", behaviour))
	}
	return l.backup()
}

// write changes the guest's disk behind its back, through qemu-io on the
// test's monitor (a qemu-io command like "write -z 0 512").
func (l *lab) write(qemuIO string) {
	l.t.Helper()
	var out string
	cmd := fmt.Sprintf("qemu-io vda %q", qemuIO)
	if err := l.admin.Execute(l.ctx, "human-monitor-command", map[string]any{"command-line": cmd}, &out); err != nil || strings.Contains(out, "rror") {
		l.t.Fatalf("%s: %v %s", cmd, err, out)
	}
}

func (l *lab) backup() *repo.Point {
	l.t.Helper()
	snap, err := backuptest.BackupVM(l.t, l.repo, l.conn, backup.VMRequest{Connection: "lab", VM: l.ref, Mode: "full",
		SnapshotMode: hypervisor.CrashConsistent, Quiesce: hypervisor.QuiesceFallback})
	if err != nil {
		l.t.Fatal(err)
	}
	return snap
}

// objects lists the repository's objects with their sizes.
func (l *lab) objects() []string {
	var out []string
	if err := l.repo.Store().List(l.ctx, "", func(fi store.ObjectInfo) error {
		out = append(out, fmt.Sprintf("%s %d", fi.Name, fi.Size))
		return nil
	}); err != nil {
		l.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func fileHash(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// assertClean: nothing of the verification is left in the state
// directory, and no QEMU runs from it.
func assertClean(t *testing.T, state string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(Root(state), "*"))
	if len(left) != 0 {
		t.Fatalf("left in the state directory: %v", left)
	}
	out, _ := exec.Command("pgrep", "-f", Root(state)).Output()
	if len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("QEMU still running from %s: pids %s", Root(state), out)
	}
}

func statuses(r *Result) string {
	var b strings.Builder
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "%d %s %s: %s %v\n", s.Number, s.Name, s.Status, s.Detail, s.Evidence)
	}
	return b.String()
}

// TestLadder: a good point passes every step, with the guest cut off from
// the host; the same point with a probe to a closed port fails at step 5;
// a panicking point fails at step 2; a point whose console never shows
// the marker fails at step 3 with a screenshot. Nothing is written to the
// repository or to the production VM's disk, and nothing is left behind.
func TestLadder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l := newLab(t, ctx)
	good := l.point(0)
	panics := l.point(guestvm.BootPanic)
	hangs := l.point(guestvm.BootHang)
	l.vm.Kill() // the disaster; and the production disk must not change from here
	prodBefore := fileHash(t, l.disk)
	objsBefore := l.objects()

	// A host service the guest must not reach: QEMU's user network maps
	// 10.0.2.2 to the host's loopback unless restricted.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	reached := make(chan struct{}, 1)
	go func() {
		if c, err := host.Accept(); err == nil {
			c.Close()
			reached <- struct{}{}
		}
	}()
	hostPort := host.Addr().(*net.TCPAddr).Port
	probes := []Probe{{Kind: ProbeHTTP, Port: guestvm.BootProbePort, Path: "/", Status: 200}, {Kind: ProbeTCP, Port: guestvm.BootProbePort},
		{Kind: ProbeExec, Command: []string{"/bin/true"}},
		// busybox wget exits 1 when it cannot connect, timeout 143 when the
		// connection hangs (127 if either were missing).
		{Kind: ProbeExec, Command: []string{"/bin/sh", "-c",
			fmt.Sprintf("timeout 3 wget -q -O /dev/null http://10.0.2.2:%d/; rc=$?; [ $rc = 1 ] || [ $rc = 143 ]", hostPort)}}}
	opts := Options{StateDir: l.state, Marker: "coffer-guest login:", Timeout: 2 * time.Minute, ProbeTimeout: 20 * time.Second}

	// The last verified screenshot a good boot is compared with: a white
	// screen, where the guest shows its text console.
	white := image.NewGray(image.Rect(0, 0, 720, 400))
	for i := range white.Pix {
		white.Pix[i] = 0xff
	}
	var whitePNG bytes.Buffer
	if err := png.Encode(&whitePNG, white); err != nil {
		t.Fatal(err)
	}
	var goodScreen []byte
	t.Run("good", func(t *testing.T) {
		o := opts
		o.Probes, o.Reference, o.ReferencePoint = probes, whitePNG.Bytes(), "0123456789abcdef"
		res, err := Run(ctx, l.repo, good, o)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Passed || len(res.Steps) != 6 {
			t.Fatalf("good point failed:\n%s\n%s", statuses(res), res.ConsoleTail)
		}
		for _, s := range res.Steps {
			if s.Status != Passed {
				t.Fatalf("step %d %s: %s\n%s", s.Number, s.Name, s.Status, statuses(res))
			}
		}
		if _, err := png.Decode(bytes.NewReader(res.Screenshot)); err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		goodScreen = res.Screenshot
		if !strings.Contains(res.Review, "from the last verified screenshot (point 01234567)") {
			t.Fatalf("a console screen compared with a white one is not flagged for review: %q %v", res.Review, res.Step(StepScreenshot).Evidence)
		}
		if !strings.Contains(res.Step(StepProbes).Evidence[probes[0].String()], "HTTP 200") {
			t.Fatalf("http probe evidence: %v", res.Step(StepProbes).Evidence)
		}
		select {
		case <-reached:
			t.Fatal("the verified guest reached a service on the host")
		default:
		}
		assertClean(t, l.state)
	})
	// The failures boot at once (the hung guest waits out its timeout),
	// each in a state directory of its own (a short name: sockets live
	// there).
	t.Run("failing", func(t *testing.T) {
		t.Run("closed-port", func(t *testing.T) {
			t.Parallel()
			o := opts
			o.StateDir, o.Probes, o.ProbeTimeout = l.state+"0", []Probe{{Kind: ProbeTCP, Port: 9}}, 3*time.Second
			o.Reference = goodScreen
			res, err := Run(ctx, l.repo, good, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Review != "" || res.Step(StepScreenshot).Evidence["changed_vs_last_verified"] == "" {
				t.Fatalf("the same guest's screen is flagged, or not compared: %q %v", res.Review, res.Step(StepScreenshot).Evidence)
			}
			if res.Passed || res.FailedStep != StepProbes || !strings.Contains(res.Step(StepProbes).Detail, "tcp:9") {
				t.Fatalf("want a failure at step 5:\n%s", statuses(res))
			}
			assertClean(t, o.StateDir)
		})
		t.Run("panic", func(t *testing.T) {
			t.Parallel()
			o := opts
			o.StateDir = l.state + "1"
			res, err := Run(ctx, l.repo, panics, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed || res.FailedStep != StepNoPanic {
				t.Fatalf("want a failure at step 2:\n%s\n%s", statuses(res), res.ConsoleTail)
			}
			t.Logf("panic: %s", res.Step(StepNoPanic).Detail)
			assertClean(t, o.StateDir)
		})
		t.Run("no-marker", func(t *testing.T) {
			t.Parallel()
			o := opts
			o.StateDir, o.Timeout = l.state+"2", 30*time.Second
			res, err := Run(ctx, l.repo, hangs, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed || res.FailedStep != StepConsole || res.Step(StepNoPanic).Status != Passed {
				t.Fatalf("want a failure at step 3:\n%s\n%s", statuses(res), res.ConsoleTail)
			}
			if s := res.Step(StepScreenshot); s.Evidence["png_bytes"] == "" || len(res.Screenshot) == 0 {
				t.Fatalf("no screenshot attached: %+v", s)
			}
			assertClean(t, o.StateDir)
		})
	})
	if got := l.objects(); strings.Join(got, "\n") != strings.Join(objsBefore, "\n") {
		t.Fatalf("the repository changed:\nbefore %v\nafter  %v", objsBefore, got)
	}
	if fileHash(t, l.disk) != prodBefore {
		t.Fatal("the production VM's disk changed")
	}
}

// TestKilledCofferLeavesNothing: coffer is SIGKILLed while the VM boots;
// its QEMU, overlay and export socket outlive it, and Cleanup (what the
// next start runs) removes them all.
func TestKilledCofferLeavesNothing(t *testing.T) {
	if os.Getenv("COFFER_BOOTVERIFY_CHILD") != "" {
		childVerify(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l := newLab(t, ctx)
	snap := l.point(guestvm.BootHang) // a VM that stays up until the timeout
	child := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestKilledCofferLeavesNothing$", "-test.v")
	child.Env = append(os.Environ(), "COFFER_BOOTVERIFY_CHILD=1", "BV_STORE="+l.store, "BV_STATE="+l.state, "BV_POINT="+snap.ID.String())
	stderr, err := child.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stdout = os.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	// Step 1 logged: QEMU runs, the overlay exists, the export serves.
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "step=1") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	journals, _ := filepath.Glob(filepath.Join(Root(l.state), "*.json"))
	if len(journals) != 1 {
		t.Fatalf("journals: %v", journals)
	}
	dir := strings.TrimSuffix(journals[0], ".json")
	pid := readPID(filepath.Join(dir, "qemu.pid"))
	overlays, _ := filepath.Glob(filepath.Join(dir, "*.overlay.qcow2"))
	if pid == 0 || gone(pid) || len(overlays) != 1 {
		t.Fatalf("mid-verification: qemu %d, overlays %v", pid, overlays)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	if gone(pid) {
		t.Fatal("QEMU died with coffer: the test shows nothing")
	}
	left, err := Cleanup(ctx, l.state)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Kind != "qemu" || left[1].Kind != "run-directory" {
		t.Fatalf("cleanup: %+v", left)
	}
	if !gone(pid) {
		t.Fatalf("QEMU %d still runs", pid)
	}
	assertClean(t, l.state)
}

// childVerify is the coffer process the test kills.
func childVerify(t *testing.T) {
	ctx := context.Background()
	st, err := local.Open(os.Getenv("BV_STORE"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte(repotest.Password), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := r.FindPoint(ctx, os.Getenv("BV_POINT"))
	if err != nil {
		t.Fatal(err)
	}
	log := slogStderr()
	_, err = Run(ctx, r, snap, Options{StateDir: os.Getenv("BV_STATE"), Timeout: 10 * time.Minute, Log: log})
	t.Fatalf("the child was to be killed, but Run returned: %v", err)
}

func slogStderr() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

// TestDamagedBootDisks: a guest that boots as installed systems do, from
// its own disk through a bootloader, then mounts its root file system.
// Its good point passes; a point whose root file system no longer mounts
// and one whose boot sector is zeroed both fail at step 3 (no login
// prompt), with a screenshot of where they stopped.
func TestDamagedBootDisks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l := newLabWith(t, ctx, biosBoot)
	if !strings.Contains(l.vm.Console(), "root file system mounted") {
		t.Fatalf("the guest did not mount its root file system:\n%s", l.vm.Console())
	}
	good := l.backup()
	l.write(fmt.Sprintf("write -z %d 1024", guestvm.RootPartOffset+1024)) // the ext4 superblock
	noRoot := l.backup()
	l.write("write -z 0 512") // the MBR: its boot code and the partition table
	noBoot := l.backup()
	l.vm.Kill()

	opts := Options{StateDir: l.state, Marker: "coffer-guest login:", Timeout: 90 * time.Second}
	res, err := Run(ctx, l.repo, good, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed {
		t.Fatalf("the good point of a disk-booted guest failed:\n%s\n%s", statuses(res), res.ConsoleTail)
	}
	assertClean(t, l.state)

	// A disk that cannot boot shows nothing, so a short wait proves it. The
	// one whose root does not mount must get as far as saying so, which
	// takes a TCG guest as long as a good boot on a loaded machine. Both
	// wait out their timeouts, so they wait at once, each in a state
	// directory of its own (a short name: sockets live there).
	short := opts
	short.Timeout = 40 * time.Second
	t.Run("damaged", func(t *testing.T) {
		for i, c := range []struct {
			name    string
			point   *repo.Point
			console string // what the serial console must show; "" for nothing of the guest's
			opts    Options
		}{
			{"root file system", noRoot, "cannot mount the root file system /dev/vda2", opts},
			{"boot sector", noBoot, "", short},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.opts.StateDir = fmt.Sprintf("%s%d", l.state, i)
				damagedFailsAtTheConsole(t, ctx, l.repo, c.point, c.opts, c.console)
			})
		}
	})
}

// damagedFailsAtTheConsole runs the boot of a point whose disk cannot
// boot: it must fail at step 3 with a screenshot, its console showing
// what the guest said (console), or nothing of the guest's ("").
func damagedFailsAtTheConsole(t *testing.T, ctx context.Context, r *repo.Repository, point *repo.Point, o Options, console string) {
	res, err := Run(ctx, r, point, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || res.FailedStep != StepConsole {
		t.Fatalf("want a failure at step 3:\n%s\n%s", statuses(res), res.ConsoleTail)
	}
	if _, err := png.Decode(bytes.NewReader(res.Screenshot)); err != nil {
		t.Fatalf("no screenshot attached: %v", err)
	}
	switch {
	case console != "" && !strings.Contains(res.ConsoleTail, console):
		t.Fatalf("console lacks %q:\n%s", console, res.ConsoleTail)
	case console == "" && strings.Contains(res.ConsoleTail, "COFFER"):
		t.Fatalf("the guest's init ran although its disk cannot boot:\n%s", res.ConsoleTail)
	}
	assertClean(t, o.StateDir)
}

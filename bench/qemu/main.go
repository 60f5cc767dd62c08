// Command qemu benchmarks live QEMU backups (issue 4's figures) in one run:
//
//	go run ./bench/qemu                 # 4 GiB disk with ~1.7 GiB of OS files
//	go run ./bench/qemu -size 1G -tree /usr/bin
//
// A guest (TCG) runs with two disks: vda, where its workload writes 64 KiB
// blocks with O_DIRECT and reports each window's write latency, and vdb, a
// qcow2 image holding an ext4 filesystem filled from this machine's /usr
// (binaries, libraries, documentation: real OS data). Then:
//
//  1. nbdcopy reads vdb to null twice: from the fleecing export coffer's
//     QEMU connector sets up on the running VM (the same export a backup
//     reads; issue 4's reference), and from the image file through
//     qemu-nbd (read-only, sharing the running VM's image);
//  2. coffer backs the running VM up in full (fleecing, NBD, chunk, hash,
//     compress, encrypt, store);
//  3. ~2% of the used space is rewritten through QEMU (so the dirty bitmap
//     sees it) and coffer takes an incremental;
//  4. the guest's write latency is compared between idle and backup time;
//  5. a second full backup goes into a repository with compression off,
//     to show how much of the time is the CPU's work on the data;
//  6. production protection (throttle.go): full backups through the
//     engine with the guest writing, alternately without and with the
//     latency-control section on its datastore (-throttle-only runs
//     just this).
//
// Every coffer row also shows the CPU seconds coffer used, and those QEMU
// (guest emulation, copy-before-write, NBD server) used meanwhile: on a
// small machine their sum over the cores bounds the elapsed time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/qmp"
)

func main() {
	size := flag.String("size", "4G", "size of the OS disk")
	tree := flag.String("tree", "/usr/bin,/usr/lib/x86_64-linux-gnu,/usr/share", "directories copied into the OS disk")
	dir := flag.String("dir", "", "work directory (default: a temporary one, removed)")
	changed := flag.Float64("changed", 0.02, "fraction of the used space rewritten before the incremental")
	runSize := flag.Int64("run", 1<<20, "bytes per rewritten run (65536: scattered 64 KiB writes, the worst case for 1 MiB chunks)")
	nice := flag.Int("nice", 0, "run coffer at this niceness (nice -n): how much a lower CPU priority spares the guest")
	var th throttleOpts
	flag.IntVar(&th.rounds, "throttle-rounds", 2, "pairs of full backups through the engine, unthrottled and throttled (0: none)")
	flag.DurationVar(&th.threshold, "threshold", 0, "latency-control threshold (0: 2x the guest's idle write latency, as QEMU times it, or with -storage-snapshot as the guest sees it)")
	flag.StringVar(&th.interval, "interval", "250ms", "latency-control interval")
	flag.StringVar(&th.minRate, "min-rate", "16MiB/s", "latency-control min-rate")
	flag.IntVar(&th.cpuNice, "cpu-nice", -1, "latency-control cpu-nice (-1: coffer's default)")
	storage := flag.Bool("storage-snapshot", false, "with -throttle-only: back up through a reflink storage snapshot of the guest's datastore (group: datastore) instead of fleecing overlays; -dir must be on XFS with reflink=1 or btrfs")
	throttleOnly := flag.Bool("throttle-only", false, "run only the production-protection comparison")
	sweep := flag.String("rates", "", "with -throttle-only: also full backups at these fixed read rates (comma-separated, e.g. 200MiB,150MiB), to show the trade-off")
	sweepRounds := flag.Int("rates-rounds", 3, "rounds of the fixed-rate backups (each beside an unlimited one)")
	flag.Parse()
	cofferNice = *nice
	ctx, cancel := rootContext(time.Hour)
	defer cancel()
	defer cleanup()
	if *dir == "" {
		d, err := os.MkdirTemp("/var/tmp", "coffer-bench-qemu-")
		must(err)
		atExit(func() { _ = os.RemoveAll(d) }) // a temporary directory: nothing to report
		*dir = d
	}
	bin := filepath.Join(*dir, "coffer")
	run(ctx, "go", "build", "-o", bin, "./cmd/coffer")

	osDisk := filepath.Join(*dir, "os.qcow2")
	used := buildOSDisk(ctx, *dir, osDisk, *size, strings.Split(*tree, ","))
	work := filepath.Join(*dir, "work.qcow2")
	run(ctx, "qemu-img", "create", "-q", "-f", "qcow2", work, "256M")

	img, err := guestvm.Build(ctx)
	must(err)
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "bench", Dir: filepath.Join(*dir, "vm"), Mode: "write", Base: 64,
		Interval: 10 * time.Millisecond, Disks: []guestvm.Disk{{ID: "vda", Path: work, Format: "qcow2"}, {ID: "vdb", Path: osDisk, Format: "qcow2", ShareRW: true}}})
	must(err)
	atExit(vm.Kill)
	within(ctx, bootDeadline, "the guest's boot (COFFER READY on its console)", func(ctx context.Context) error {
		_, err := vm.WaitConsole(ctx, "COFFER READY")
		return err
	})

	env := append(os.Environ(), "COFFER_REPO="+filepath.Join(*dir, "repo"), "COFFER_PASSWORD=bench", "COFFER_CONFIG=/dev/null",
		"COFFER_STATE_DIR="+filepath.Join(*dir, "state"), "COFFER_CATALOG="+filepath.Join(*dir, "catalog.db"))
	if *throttleOnly {
		if *storage {
			storageSnapshot = *dir
			// The repositories go on another file system: on the
			// datastore's own device their writes would be the
			// congestion the controller sees.
			repos, err := os.MkdirTemp("/var/tmp", "coffer-bench-repos-")
			must(err)
			atExit(func() { _ = os.RemoveAll(repos) }) // temporary: nothing to report
			repoDir = repos
		}
		idle := latencies(ctx, vm, 8)
		if th.rounds > 0 {
			printThrottle(idle, throttleBench(ctx, vm, bin, *dir, env, idle, th))
		}
		if *sweep != "" {
			rateSweep(ctx, vm, bin, *dir, env, idle, strings.Split(*sweep, ","), *sweepRounds)
		}
		return
	}

	// 1. The wire: nbdcopy from the running VM's fleecing export, then
	// through qemu-nbd on the same image.
	fleece, fleeceQEMU := nbdcopyFleece(ctx, filepath.Join(*dir, "state-nbdcopy"), vm.QMPPath, "vdb", vm.PID())
	sock := filepath.Join(*dir, "qnbd.sock")
	qn := command(ctx, "qemu-nbd", "-r", "-e", "8", "-k", sock, "--image-opts",
		"driver=qcow2,file.driver=file,file.filename="+osDisk+",file.locking=off")
	must(qn.Start())
	stopNBD := func() { _ = qn.Process.Kill(); _ = qn.Wait() } // killed on purpose: its exit status says so
	atExit(stopNBD)
	waitSocket(sock)
	began := time.Now()
	run(ctx, "nbdcopy", "nbd+unix:///?socket="+sock, "null:")
	nbdcopy := time.Since(began)
	stopNBD()

	coffer := func(args ...string) result {
		qemuBefore := processCPU(vm.PID())
		began := time.Now()
		out, state := runCoffer(ctx, bin, env, args...)
		r := result{QEMUCPU: processCPU(vm.PID()) - qemuBefore, Process: time.Since(began),
			CofferCPU: state.UserTime() + state.SystemTime()}
		if args[0] == "backup" {
			if err := json.Unmarshal(out, &r); err != nil {
				fatalf("coffer %v output: %v: %s", args, err, out)
			}
		}
		return r
	}
	coffer("init")
	idleLat := latencies(ctx, vm, 8)

	// 2. Full backup, with the guest's write latency sampled meanwhile.
	mark := vm.Mark()
	full := coffer("backup", "vm", vm.QMPPath, "--json")
	busyLat := latencyFrom(vm, mark)

	// 3. Rewrite ~2% of the used space through QEMU, then an incremental.
	// The test monitor serves one client at a time: this one is closed
	// before the production-protection comparison dials it again (left
	// open, that dial waited for a greeting until the run was killed).
	dirty := int64(float64(used) * *changed)
	rewrite(ctx, vm.TestQMP, "vdb", dirty, used, *runSize)
	inc := coffer("backup", "vm", vm.QMPPath, "--json")

	// 5. A full backup of the running VM into a repository that does not
	// compress: the same wire and pipeline without zstd's share of the CPU.
	env = append(env, "COFFER_REPO="+filepath.Join(*dir, "repo-uncompressed"))
	coffer("init", "--compression-level", "-1")
	plain := coffer("backup", "vm", vm.QMPPath, "--mode", "full", "--json")

	// The pipeline alone: the same OS image from a raw file into a new
	// repository, no VM, no NBD.
	raw := filepath.Join(*dir, "os-copy.raw")
	run(ctx, "qemu-img", "convert", "-U", "-O", "raw", osDisk, raw)
	env = append(env, "COFFER_REPO="+filepath.Join(*dir, "repo-file"))
	coffer("init")
	file := coffer("backup", "disk", raw, "--json")
	os.Remove(raw)

	osBytes := diskBytes(ctx, osDisk)
	fmt.Printf("OS disk %s, %.2f GiB used (%s)\n\n", *size, gib(used), *tree)
	fmt.Printf("%-44s %9s %10s %9s %9s %11s %9s\n", "", "seconds", "MiB/s", "ratio", "process", "coffer CPU", "QEMU CPU")
	fmt.Printf("%-44s %9.1f %10.0f %9s %9s %11s %8.1fs\n", "nbdcopy, fleecing export -> null (the wire)", fleece.Seconds(), mib(osBytes)/fleece.Seconds(), "1.00", "", "", fleeceQEMU.Seconds())
	fmt.Printf("%-44s %9.1f %10.0f %8.2fx\n", "nbdcopy, qemu-nbd on the image -> null", nbdcopy.Seconds(), mib(osBytes)/nbdcopy.Seconds(), nbdcopy.Seconds()/fleece.Seconds())
	row := func(name string, r result, ratio float64) {
		fmt.Printf("%-44s %9.1f %10.0f %8.2fx %8.1fs %10.1fs %8.1fs\n", name, r.Seconds, mib(r.Read)/r.Seconds, ratio, r.Process.Seconds(), r.CofferCPU.Seconds(), r.QEMUCPU.Seconds())
	}
	row("coffer full backup (both disks)", full, full.Seconds/fleece.Seconds())
	row("coffer full backup, compression off", plain, plain.Seconds/fleece.Seconds())
	row("coffer backup disk, the OS image as a file", file, file.Seconds/fleece.Seconds())
	row(fmt.Sprintf("coffer incremental (%.0f%% of used, %d KiB runs)", *changed*100, *runSize>>10), inc, inc.Seconds/full.Seconds)
	fmt.Printf("\nincremental: read %.1f MiB = %.2f%% of the %s disk; time %.1f%% of the full\n",
		mib(inc.Read), 100*float64(inc.Read)/float64(sizeBytes(*size)), *size, 100*inc.Seconds/full.Seconds)
	fmt.Printf("guest write latency (64 KiB O_DIRECT, TCG): idle avg %d us max %d us; during the full backup avg %d us max %d us\n",
		idleLat.avg, idleLat.max, busyLat.avg, busyLat.max)
	if th.rounds > 0 {
		printThrottle(idleLat, throttleBench(ctx, vm, bin, *dir, env, idleLat, th))
	}
}

// nbdcopyFleece times nbdcopy reading disk of the VM behind qmpSock to
// null from the fleecing export coffer's QEMU connector creates for a
// backup (point-in-time overlay, QEMU's own NBD server), then tears the
// session down as a failed backup would (tracking untouched). The export's
// socket and name are in the session's journal.
func nbdcopyFleece(ctx context.Context, stateDir, qmpSock, disk string, qemuPID int) (took, qemuCPU time.Duration) {
	conn, err := qemu.New(qemu.Config{Sockets: []string{qmpSock}, StateDir: stateDir})
	must(err)
	var vms []hypervisor.VM
	within(ctx, monitorDeadline, "the QEMU connector's inventory", func(ctx context.Context) (err error) {
		vms, err = conn.Inventory(ctx)
		return err
	})
	if len(vms) != 1 {
		fatalf("%d VMs behind %s", len(vms), qmpSock)
	}
	var sess hypervisor.Session
	within(ctx, commandDeadline, "the fleecing session's set-up", func(ctx context.Context) (err error) {
		sess, err = conn.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "bench-nbdcopy", Mode: hypervisor.CrashConsistent})
		return err
	})
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandDeadline)
		defer cancel()
		if _, err := sess.Close(closeCtx, false); err != nil {
			log.Printf("closing the nbdcopy fleecing session: %v", err)
		}
	}()
	files, err := filepath.Glob(filepath.Join(stateDir, "journal", "*"))
	must(err)
	if len(files) != 1 {
		fatalf("%d journals in %s", len(files), stateDir)
	}
	var j struct {
		NBDServer string `json:"nbd_server"`
		Disks     []struct {
			ID     string `json:"id"`
			Export string `json:"export"`
		} `json:"disks"`
	}
	b, err := os.ReadFile(files[0])
	must(err)
	must(json.Unmarshal(b, &j))
	for _, d := range j.Disks {
		if d.ID == disk {
			cpu := processCPU(qemuPID)
			began := time.Now()
			run(ctx, "nbdcopy", "nbd+unix:///"+d.Export+"?socket="+j.NBDServer, "null:")
			return time.Since(began), processCPU(qemuPID) - cpu
		}
	}
	fatalf("no export of %s in %s", disk, files[0])
	return 0, 0
}

// result is one coffer run: the figures of its --json output, its own CPU
// time, and the CPU time the VM's QEMU process used meanwhile.
type result struct {
	Seconds   float64       `json:"duration_seconds"`
	Read      int64         `json:"read_bytes"`
	Process   time.Duration // the coffer process's life: start-up, session set-up and teardown too
	CofferCPU time.Duration
	QEMUCPU   time.Duration
}

// processCPU is the user and system CPU time pid has used so far
// (/proc/PID/stat fields 14 and 15, in clock ticks of 1/100 s).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(err)
	// The command name (field 2) may hold spaces: count from its ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err := strconv.ParseInt(f[11], 10, 64)
	must(err)
	stime, err := strconv.ParseInt(f[12], 10, 64)
	must(err)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// buildOSDisk makes an ext4 filesystem from dirs (hard links into one
// staging tree, so nothing is copied twice) and converts it to qcow2.
func buildOSDisk(ctx context.Context, dir, out, size string, dirs []string) int64 {
	stage := filepath.Join(dir, "stage")
	for _, d := range dirs {
		dst := filepath.Join(stage, d)
		must(os.MkdirAll(filepath.Dir(dst), 0o755))
		if err := command(ctx, "cp", "-al", d, dst).Run(); err != nil {
			run(ctx, "cp", "-a", d, dst) // another filesystem: copy
		}
	}
	raw := filepath.Join(dir, "os.raw")
	run(ctx, "mkfs.ext4", "-q", "-F", "-d", stage, raw, size)
	os.RemoveAll(stage)
	run(ctx, "qemu-img", "convert", "-O", "qcow2", raw, out)
	os.Remove(raw)
	return diskBytes(ctx, out)
}

// rewrite writes n bytes in runs of run bytes (file rewrites are
// contiguous extents) at random 64 KiB-aligned offsets of the used area,
// through QEMU so the dirty bitmap records them.
func rewrite(ctx context.Context, monitor, dev string, n, used, run int64) {
	cl := dialMonitor(ctx, monitor)
	defer cl.Close()
	for done := int64(0); done < n; done += run {
		off := rand.Int64N((used-run)/65536) * 65536
		cmd := fmt.Sprintf("qemu-io %s \"write -P 0x%02x %d %d\"", dev, rand.IntN(255)+1, off, run)
		var out string
		within(ctx, monitorDeadline, cmd+" on the test monitor", func(ctx context.Context) error {
			return cl.Execute(ctx, "human-monitor-command", map[string]any{"command-line": cmd}, &out)
		})
		if strings.TrimSpace(out) != "" && !strings.Contains(out, "wrote") {
			fatalf("%s: %s", cmd, out)
		}
	}
}

type lat struct{ avg, max int64 }

var latRe = regexp.MustCompile(`lat_avg_us=(\d+) lat_max_us=(\d+)`)

func latencies(ctx context.Context, vm *guestvm.VM, windows int) lat {
	mark := vm.Mark()
	m := mark
	for i := 0; i < windows; i++ {
		within(ctx, windowDeadline, fmt.Sprintf("the guest's latency window %d of %d (COFFER WROTE on its console)", i+1, windows),
			func(ctx context.Context) (err error) {
				m, _, err = vm.WaitConsoleFrom(ctx, m, "COFFER WROTE")
				return err
			})
	}
	return latencyFrom(vm, mark)
}

// latencyFrom summarizes the latency windows the guest printed since mark.
func latencyFrom(vm *guestvm.VM, mark int) lat {
	lines := strings.Split(vm.Console(), "\n")
	var l lat
	var n int64
	for i, line := range lines {
		if i < mark {
			continue
		}
		if m := latRe.FindStringSubmatch(line); m != nil {
			a, _ := strconv.ParseInt(m[1], 10, 64)
			x, _ := strconv.ParseInt(m[2], 10, 64)
			l.avg += a
			l.max = max(l.max, x)
			n++
		}
	}
	if n > 0 {
		l.avg /= n
	}
	return l
}

func waitSocket(p string) {
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	fatalf("qemu-nbd did not create %s within 5 s", p)
}

func diskBytes(ctx context.Context, qcow string) int64 {
	out := output(ctx, "qemu-img info "+qcow, "qemu-img", "info", "--output=json", "-U", qcow)
	var info struct {
		Actual int64 `json:"actual-size"`
	}
	must(json.Unmarshal(out, &info))
	return info.Actual
}

func sizeBytes(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n * mult
}

// run runs a command to its end, within commandDeadline.
func run(ctx context.Context, name string, args ...string) {
	within(ctx, commandDeadline, fmt.Sprintf("%s %v", name, args), func(ctx context.Context) error {
		cmd := command(ctx, name, args...)
		cmd.Stderr = os.Stderr
		return cmd.Run()
	})
}

// dialMonitor connects to a QMP monitor within monitorDeadline.
func dialMonitor(ctx context.Context, path string) *qmp.Client {
	var cl *qmp.Client
	within(ctx, monitorDeadline, "the greeting of the QMP monitor "+path, func(ctx context.Context) (err error) {
		cl, err = qmp.Dial(ctx, path)
		return err
	})
	return cl
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
func gib(b int64) float64 { return float64(b) / (1 << 30) }

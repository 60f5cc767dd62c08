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
//  4. the guest's write latency is compared between idle and backup time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
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
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if *dir == "" {
		d, err := os.MkdirTemp("/var/tmp", "coffer-bench-qemu-")
		must(err)
		defer os.RemoveAll(d)
		*dir = d
	}
	bin := filepath.Join(*dir, "coffer")
	run("go", "build", "-o", bin, "./cmd/coffer")

	osDisk := filepath.Join(*dir, "os.qcow2")
	used := buildOSDisk(*dir, osDisk, *size, strings.Split(*tree, ","))
	work := filepath.Join(*dir, "work.qcow2")
	run("qemu-img", "create", "-q", "-f", "qcow2", work, "256M")

	img, err := guestvm.Build(ctx)
	must(err)
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "bench", Dir: filepath.Join(*dir, "vm"), Mode: "write", Base: 64,
		Interval: 10 * time.Millisecond, Disks: []guestvm.Disk{{ID: "vda", Path: work, Format: "qcow2"}, {ID: "vdb", Path: osDisk, Format: "qcow2"}}})
	must(err)
	defer vm.Kill()
	_, err = vm.WaitConsole(ctx, "COFFER READY")
	must(err)

	// 1. The wire: nbdcopy from the running VM's fleecing export, then
	// through qemu-nbd on the same image.
	fleece := nbdcopyFleece(ctx, filepath.Join(*dir, "state-nbdcopy"), vm.QMPPath, "vdb")
	sock := filepath.Join(*dir, "qnbd.sock")
	qn := exec.Command("qemu-nbd", "-r", "-e", "8", "-k", sock, "--image-opts",
		"driver=qcow2,file.driver=file,file.filename="+osDisk+",file.locking=off")
	must(qn.Start())
	waitSocket(sock)
	began := time.Now()
	run("nbdcopy", "nbd+unix:///?socket="+sock, "null:")
	nbdcopy := time.Since(began)
	qn.Process.Kill()
	qn.Wait()

	env := append(os.Environ(), "COFFER_REPO="+filepath.Join(*dir, "repo"), "COFFER_PASSWORD=bench", "COFFER_CONFIG=/dev/null",
		"COFFER_STATE_DIR="+filepath.Join(*dir, "state"), "COFFER_CATALOG="+filepath.Join(*dir, "catalog.db"))
	coffer := func(args ...string) []byte {
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Stderr = env, os.Stderr
		out, err := cmd.Output()
		if err != nil {
			log.Fatalf("coffer %v: %v", args, err)
		}
		return out
	}
	coffer("init")
	idleLat := latencies(ctx, vm, 8)

	// 2. Full backup, with the guest's write latency sampled meanwhile.
	mark := vm.Mark()
	full := backup(coffer, vm.QMPPath)
	busyLat := latencyFrom(vm, mark)

	// 3. Rewrite ~2% of the used space through QEMU, then an incremental.
	admin, err := qmp.Dial(ctx, vm.TestQMP)
	must(err)
	dirty := int64(float64(used) * *changed)
	rewrite(ctx, admin, "vdb", dirty, used, *runSize)
	inc := backup(coffer, vm.QMPPath)

	// The pipeline alone: the same OS image from a raw file into a new
	// repository, no VM, no NBD.
	raw := filepath.Join(*dir, "os-copy.raw")
	run("qemu-img", "convert", "-U", "-O", "raw", osDisk, raw)
	env = append(env, "COFFER_REPO="+filepath.Join(*dir, "repo-file"))
	coffer("init")
	var fileRes struct {
		Seconds   float64 `json:"duration_seconds"`
		BytesRead int64   `json:"bytes_read"`
	}
	out := coffer("backup", "disk", raw, "--json")
	must(json.Unmarshal(out, &fileRes))
	os.Remove(raw)

	osBytes := diskBytes(osDisk)
	fmt.Printf("OS disk %s, %.2f GiB used (%s)\n\n", *size, gib(used), *tree)
	fmt.Printf("%-44s %9s %10s %9s\n", "", "seconds", "MiB/s", "ratio")
	fmt.Printf("%-44s %9.1f %10.0f %9s\n", "nbdcopy, fleecing export -> null (the wire)", fleece.Seconds(), mib(osBytes)/fleece.Seconds(), "1.00")
	fmt.Printf("%-44s %9.1f %10.0f %8.2fx\n", "nbdcopy, qemu-nbd on the image -> null", nbdcopy.Seconds(), mib(osBytes)/nbdcopy.Seconds(), nbdcopy.Seconds()/fleece.Seconds())
	fmt.Printf("%-44s %9.1f %10.0f %8.2fx\n", "coffer full backup (both disks)", full.Seconds, mib(full.Read)/full.Seconds, full.Seconds/fleece.Seconds())
	fmt.Printf("%-44s %9.1f %10.0f %8.2fx\n", "coffer backup disk, the OS image as a file", fileRes.Seconds, mib(fileRes.BytesRead)/fileRes.Seconds, fileRes.Seconds/fleece.Seconds())
	fmt.Printf("%-44s %9.1f %10.0f %8.2fx\n", fmt.Sprintf("coffer incremental (%.0f%% of used, %d KiB runs)", *changed*100, *runSize>>10), inc.Seconds, mib(inc.Read)/inc.Seconds, inc.Seconds/full.Seconds)
	fmt.Printf("\nincremental: read %.1f MiB = %.2f%% of the %s disk; time %.1f%% of the full\n",
		mib(inc.Read), 100*float64(inc.Read)/float64(sizeBytes(*size)), *size, 100*inc.Seconds/full.Seconds)
	fmt.Printf("guest write latency (64 KiB O_DIRECT, TCG): idle avg %d us max %d us; during the full backup avg %d us max %d us\n",
		idleLat.avg, idleLat.max, busyLat.avg, busyLat.max)
}

// nbdcopyFleece times nbdcopy reading disk of the VM behind qmpSock to
// null from the fleecing export coffer's QEMU connector creates for a
// backup (point-in-time overlay, QEMU's own NBD server), then tears the
// session down as a failed backup would (tracking untouched). The export's
// socket and name are in the session's journal.
func nbdcopyFleece(ctx context.Context, stateDir, qmpSock, disk string) time.Duration {
	conn, err := qemu.New(qemu.Config{Sockets: []string{qmpSock}, StateDir: stateDir})
	must(err)
	vms, err := conn.Inventory(ctx)
	must(err)
	if len(vms) != 1 {
		log.Fatalf("%d VMs behind %s", len(vms), qmpSock)
	}
	sess, err := conn.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "bench-nbdcopy", Mode: hypervisor.CrashConsistent})
	must(err)
	defer sess.Close(context.WithoutCancel(ctx), false)
	files, err := filepath.Glob(filepath.Join(stateDir, "journal", "*"))
	must(err)
	if len(files) != 1 {
		log.Fatalf("%d journals in %s", len(files), stateDir)
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
			began := time.Now()
			run("nbdcopy", "nbd+unix:///"+d.Export+"?socket="+j.NBDServer, "null:")
			return time.Since(began)
		}
	}
	log.Fatalf("no export of %s in %s", disk, files[0])
	return 0
}

type result struct {
	Seconds float64
	Read    int64
}

func backup(coffer func(...string) []byte, sock string) result {
	var r struct {
		Seconds   float64 `json:"duration_seconds"`
		BytesRead int64   `json:"bytes_read"`
	}
	out := coffer("backup", "vm", sock, "--json")
	if err := json.Unmarshal(out, &r); err != nil {
		log.Fatalf("backup output: %v: %s", err, out)
	}
	return result{r.Seconds, r.BytesRead}
}

// buildOSDisk makes an ext4 filesystem from dirs (hard links into one
// staging tree, so nothing is copied twice) and converts it to qcow2.
func buildOSDisk(dir, out, size string, dirs []string) int64 {
	stage := filepath.Join(dir, "stage")
	for _, d := range dirs {
		dst := filepath.Join(stage, d)
		must(os.MkdirAll(filepath.Dir(dst), 0o755))
		if err := exec.Command("cp", "-al", d, dst).Run(); err != nil {
			run("cp", "-a", d, dst) // another filesystem: copy
		}
	}
	raw := filepath.Join(dir, "os.raw")
	run("mkfs.ext4", "-q", "-F", "-d", stage, raw, size)
	os.RemoveAll(stage)
	run("qemu-img", "convert", "-O", "qcow2", raw, out)
	os.Remove(raw)
	return diskBytes(out)
}

// rewrite writes n bytes in runs of run bytes (file rewrites are
// contiguous extents) at random 64 KiB-aligned offsets of the used area,
// through QEMU so the dirty bitmap records them.
func rewrite(ctx context.Context, cl *qmp.Client, dev string, n, used, run int64) {
	for done := int64(0); done < n; done += run {
		off := rand.Int64N((used-run)/65536) * 65536
		cmd := fmt.Sprintf("qemu-io %s \"write -P 0x%02x %d %d\"", dev, rand.IntN(255)+1, off, run)
		var out string
		must(cl.Execute(ctx, "human-monitor-command", map[string]any{"command-line": cmd}, &out))
	}
}

type lat struct{ avg, max int64 }

var latRe = regexp.MustCompile(`lat_avg_us=(\d+) lat_max_us=(\d+)`)

func latencies(ctx context.Context, vm *guestvm.VM, windows int) lat {
	mark := vm.Mark()
	m := mark
	for i := 0; i < windows; i++ {
		var err error
		m, _, err = vm.WaitConsoleFrom(ctx, m, "COFFER WROTE")
		must(err)
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
	log.Fatalf("qemu-nbd did not create %s", p)
}

func diskBytes(qcow string) int64 {
	out, err := exec.Command("qemu-img", "info", "--output=json", "-U", qcow).Output()
	must(err)
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

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("%s %v: %v", name, args, err)
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
func gib(b int64) float64 { return float64(b) / (1 << 30) }

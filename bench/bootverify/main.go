// Command bootverify measures boot verification on this machine: the
// busybox test guest's point put through the whole ladder (start, no
// panic, console marker, guest agent, an HTTP probe, screenshot) by the
// real coffer binary, one at a time and then several at once, with the
// points verified per minute and the peak memory of everything the
// verifications ran (coffer and its QEMU processes).
//
//	go run ./bench/bootverify                       # 5 runs alone, then 2 at once
//	go run ./bench/bootverify -runs 3 -parallel 2,3
//	go run ./bench/bootverify -boot efi             # the guest boots from its disk under OVMF
//	go run ./bench/bootverify -guest debian -runs 3 -parallel ''    # Debian 12 from Debian's packages
//	go run ./bench/bootverify -prepare              # only build the Debian guest's image
//
// -boot efi gives the guest the disk an installed UEFI system has (GPT,
// an EFI System Partition with \EFI\BOOT\BOOTX64.EFI, an ext4 root file
// system it mounts: guestvm.BuildEFIBootDisk), so the ladder includes
// OVMF's start and the loader; the default boots the kernel directly.
//
// The target for the full ladder of this guest is 15 s. Under
// TCG a guest's boot is CPU-bound, so verifications in parallel share the
// cores: the figure to read is points per minute, not each one's time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/ovmf"
)

func main() {
	runs := flag.Int("runs", 5, "verifications one at a time")
	parallelFlag := flag.String("parallel", "2", "comma-separated numbers of verifications at once")
	dir := flag.String("dir", ".cache/bench/bootverify", "work directory")
	boot := flag.String("boot", "kernel", "how the busybox guest boots: kernel (QEMU's -kernel) or efi (OVMF, from its disk)")
	guest := flag.String("guest", "busybox", "busybox (coffer's test guest) or debian (Debian 12 from Debian's packages, booted "+
		"under UEFI; built once into ~/.cache/coffer/debian-guest)")
	prepare := flag.Bool("prepare", false, "only build the Debian guest's cached image (no QEMU runs)")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	if *prepare {
		img, err := debianImage(ctx, log.Printf)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(img)
		return
	}
	work, err := filepath.Abs(*dir)
	if err != nil {
		log.Fatal(err)
	}
	os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		log.Fatal(err)
	}
	bin := filepath.Join(work, "coffer")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/coffer").CombinedOutput(); err != nil {
		log.Fatalf("build coffer: %v\n%s", err, out)
	}
	env := append(os.Environ(), "COFFER_REPO="+filepath.Join(work, "repo"), "COFFER_PASSWORD=bench",
		"COFFER_CATALOG="+filepath.Join(work, "catalog.db"), "COFFER_STATE_DIR="+filepath.Join(work, "state"),
		"COFFER_CONFIG=/dev/null")
	coffer := func(args ...string) ([]byte, error) {
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = env
		return c.Output()
	}
	if *boot != "kernel" && *boot != "efi" {
		log.Fatalf("-boot %q: kernel or efi", *boot)
	}
	// The busybox guest answers HTTP; the Debian one runs sshd, and the
	// guest agent runs systemctl in it.
	title := fmt.Sprintf("the busybox test guest, %s boot (full ladder, HTTP probe)", *boot)
	check := []string{"--marker", guestvm.BootMarker, "--probe", fmt.Sprintf("http:%d/=200", guestvm.BootProbePort)}
	switch *guest {
	case "busybox":
		if err := makePoint(ctx, work, *boot == "efi", coffer); err != nil {
			log.Fatal(err)
		}
	case "debian":
		title = "the Debian 12 guest under UEFI (full ladder: sshd's port, systemctl through the guest agent)"
		check = []string{"--marker", debianHostname + " login:", "--probe", "tcp:22", "--probe", "exec:/usr/bin/systemctl is-active ssh",
			"--timeout", "20m", "--probe-timeout", "5m"}
		if err := makeDebianPoint(ctx, work, coffer); err != nil {
			log.Fatal(err)
		}
	default:
		log.Fatalf("-guest %q: busybox or debian", *guest)
	}
	verify := func() (*api.BootVerification, error) {
		out, err := coffer(append(append([]string{"verify", "boot", "latest"}, check...), "--json")...)
		var d api.BootVerification
		if jerr := json.Unmarshal(out, &d); jerr != nil || !d.Passed {
			return nil, fmt.Errorf("verify boot: %v %v\n%s", err, jerr, out)
		}
		return &d, nil
	}

	fmt.Printf("## Boot verification of %s\n\n", title)
	fmt.Printf("| run | ladder | vm-starts | no-panic | console-marker | guest-agent | probes | screenshot |\n|---|---|---|---|---|---|---|---|\n")
	var ladders []float64
	for i := range *runs {
		d, err := verify()
		if err != nil {
			log.Fatal(err)
		}
		ladders = append(ladders, d.DurationSeconds)
		row := fmt.Sprintf("| %d | %.1f s |", i+1, d.DurationSeconds)
		for _, s := range d.Steps {
			row += fmt.Sprintf(" %.1f s |", s.DurationSeconds)
		}
		fmt.Println(row)
		if i == 0 {
			defer fmt.Printf("\nFirst run's guest agent: %v\n", d.Steps[3].Evidence)
		}
	}
	slices.Sort(ladders)
	med := ladders[len(ladders)/2]
	fmt.Printf("\nLadder: min %.1f s, median %.1f s, max %.1f s; median / 15 s target = %.2f\n\n",
		ladders[0], med, ladders[len(ladders)-1], med/15)

	if *parallelFlag != "" {
		fmt.Printf("| at once | points | wall | points per minute | peak memory (coffer + QEMU) |\n|---|---|---|---|---|\n")
	}
	for _, f := range strings.Split(*parallelFlag, ",") {
		if f == "" {
			break // -parallel "": one at a time only
		}
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 {
			log.Fatalf("-parallel: %q", f)
		}
		var peak atomic.Int64
		stop := make(chan struct{})
		go sampleMemory(work, &peak, stop)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 2*p)
		for range p {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 2 {
					if _, err := verify(); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		close(errs)
		if err := <-errs; err != nil {
			log.Fatal(err)
		}
		wall := time.Since(start)
		n := 2 * p
		fmt.Printf("| %d | %d | %.1f s | %.1f | %d MiB |\n", p, n, wall.Seconds(), float64(n)/wall.Minutes(), peak.Load()>>20)
	}
}

// makePoint boots the production guest, backs it up once and stops it.
func makePoint(ctx context.Context, work string, efi bool, coffer func(...string) ([]byte, error)) error {
	img, err := guestvm.Build(ctx)
	if err != nil {
		return err
	}
	o := guestvm.Options{Name: "web-1", Dir: filepath.Join(work, "vm"), Mode: "boot", GuestAgent: true}
	disk := guestvm.Disk{ID: "vda", Path: filepath.Join(work, "vda.qcow2"), Format: "qcow2"}
	if efi {
		fw, ok := ovmf.Find()
		if !ok {
			return fmt.Errorf("-boot efi needs OVMF: run scripts/ci/install-qemu.sh")
		}
		disk.Path, disk.Format = filepath.Join(work, "vda.raw"), "raw"
		if _, err := guestvm.BuildEFIBootDisk(ctx, img, disk.Path, guestvm.BootDiskOptions{Agent: true}); err != nil {
			return err
		}
		o.DiskBoot, o.EFI = true, &fw
	} else if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk.Path, "16M").CombinedOutput(); err != nil {
		return fmt.Errorf("%v %s", err, out)
	}
	o.Disks = []guestvm.Disk{disk}
	vm, err := guestvm.Start(ctx, img, o)
	if err != nil {
		return err
	}
	defer vm.Kill()
	if _, err := vm.WaitConsole(ctx, guestvm.BootMarker); err != nil {
		return err
	}
	if out, err := coffer("init"); err != nil {
		return fmt.Errorf("init: %v %s", err, out)
	}
	if out, err := coffer("backup", "vm", vm.QMPPath); err != nil {
		return fmt.Errorf("backup: %v %s", err, out)
	}
	return nil
}

// makeDebianPoint boots the Debian guest on a copy-on-write overlay of
// its cached image, backs it up once and stops it.
func makeDebianPoint(ctx context.Context, work string, coffer func(...string) ([]byte, error)) error {
	img, err := debianImage(ctx, log.Printf)
	if err != nil {
		return err
	}
	fw, ok := ovmf.Find()
	if !ok {
		return fmt.Errorf("the Debian guest boots under UEFI: install OVMF (scripts/ci/install-qemu.sh)")
	}
	disk := filepath.Join(work, "vda.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", img, disk).CombinedOutput(); err != nil {
		return fmt.Errorf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, &guestvm.Image{}, guestvm.Options{Name: "debian-1", Dir: filepath.Join(work, "vm"), GuestAgent: true,
		DiskBoot: true, EFI: &fw, MemoryMiB: 1024, Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		return err
	}
	defer vm.Kill()
	// The getty's banner line: its prompt ends with no newline, which a
	// console read line by line never returns.
	if _, err := vm.WaitConsole(ctx, debianHostname+" ttyS0"); err != nil {
		return fmt.Errorf("%w\n%s", err, vm.Console())
	}
	if out, err := coffer("init"); err != nil {
		return fmt.Errorf("init: %v %s", err, out)
	}
	if out, err := coffer("backup", "vm", vm.QMPPath); err != nil {
		return fmt.Errorf("backup: %v %s", err, out)
	}
	return nil
}

// sampleMemory records the peak of the summed resident memory of every
// process whose command line names the work directory (coffer and the
// QEMU processes it starts from its state directory) until stop closes.
func sampleMemory(work string, peak *atomic.Int64, stop <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		var sum int64
		pids, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range pids {
			cmd, err := os.ReadFile(p + "/cmdline")
			if err != nil || !strings.Contains(string(cmd), work) {
				continue
			}
			status, err := os.ReadFile(p + "/status")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					sum += kb << 10
				}
			}
		}
		if sum > peak.Load() {
			peak.Store(sum)
		}
	}
}

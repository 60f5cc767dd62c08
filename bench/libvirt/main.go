// Command libvirt benchmarks the libvirt connector (issue 18) against
// coffer's own QEMU (QMP) connector on the same running guest:
//
//	go run ./bench/libvirt                 # 4 GiB disk with ~1.7 GiB of OS files
//	go run ./bench/libvirt -size 1G -tree /usr/bin
//
// A private libvirtd (session mode, as the tests start it) runs a TCG
// guest with two qcow2 disks: vda, where its workload writes 64 KiB blocks
// every 10 ms, and vdb, an ext4 filesystem filled from this machine's /usr.
// The domain also carries a QMP monitor of coffer's own
// (<qemu:commandline>), so both connectors back up the very same VM:
//
//  1. full backups alternate between the QMP connector and the libvirt
//     connector (-rounds each), every one into a fresh repository, and the
//     ratio of their times is reported;
//  2. -changed of vdb's used space is rewritten through QEMU (HMP qemu-io
//     over libvirt's monitor, so the checkpoint bitmaps see it) and the
//     libvirt connector takes an incremental: its bytes read are reported
//     as a share of the disk;
//  3. the same rewrite before each of -check-rounds pairs of incrementals,
//     without the change-tracking self-check and with its default sample:
//     the share of time and bytes the check adds; and with a large sample
//     (-check-big spans per disk), whose cost per span stands above the
//     rounds' spread and prices the default's few spans.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/store/local"
	"github.com/coffer-backup/coffer/internal/testutil"
)

func main() {
	size := flag.String("size", "4G", "size of the OS disk")
	tree := flag.String("tree", "/usr/bin,/usr/lib/x86_64-linux-gnu,/usr/share", "directories copied into the OS disk")
	changed := flag.Float64("changed", 0.02, "fraction of the used space rewritten before the incremental")
	runSize := flag.Int64("run", 1<<20, "bytes per rewritten run")
	rounds := flag.Int("rounds", 3, "full backups per connector, alternating")
	checkRounds := flag.Int("check-rounds", 3, "incrementals without and with the change-tracking self-check, alternating")
	bigSample := flag.Int("check-big", 128, "spans per disk of a third, large sample in each check round: its cost per span is measurable where the default's is within the rounds' spread (0: none)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	d, err := testutil.LaunchLibvirtd("/usr/sbin/libvirtd")
	if d != nil {
		atExit = d.Stop // the daemon and the guest, also when the run fails
		defer d.Stop()
	}
	must(err)
	dir := filepath.Join(d.Dir, "vm")
	must(os.MkdirAll(dir, 0o755))
	osDisk := filepath.Join(dir, "os.qcow2")
	used := buildOSDisk(dir, osDisk, *size, strings.Split(*tree, ","))
	run("qemu-img", "create", "-q", "-f", "qcow2", filepath.Join(dir, "work.qcow2"), "256M")
	img, err := guestvm.Build(ctx)
	must(err)
	for src, dst := range map[string]string{img.Kernel: "vmlinuz", img.Initrd: "initrd.gz"} {
		b, err := os.ReadFile(src)
		must(err)
		must(os.WriteFile(filepath.Join(dir, dst), b, 0o644))
	}
	must(d.ChownAll(dir))
	u, _ := url.Parse(d.URI)
	lv, err := golibvirt.ConnectToURI(u)
	must(err)
	defer lv.Disconnect()
	dom, err := lv.DomainDefineXML(domainXML(dir))
	must(err)
	lc, err := libvirt.New(libvirt.Config{URI: d.URI, StateDir: filepath.Join(d.Dir, "ls")})
	must(err)
	defer lc.Close()
	console := filepath.Join(dir, "console.log")
	startDomain := func() {
		from := consoleLen(console)
		must(lv.DomainCreate(dom))
		waitConsole(ctx, console, from, "COFFER READY")
	}
	lref := hypervisor.VMRef{Name: "bench"}

	// The same guest on the same disks, under libvirt, then under a QEMU
	// coffer starts with a monitor of its own, round after round.
	var qt, lt []time.Duration
	var qb, lb int64
	for i := 0; i < *rounds; i++ {
		startDomain()
		s, dt := backupOnce(ctx, newRepo(d.Dir), lc, lref, "full", "libvirt")
		lt, lb = append(lt, dt), s.BytesRead
		must(lv.DomainDestroy(dom))

		vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "bench", Dir: filepath.Join(d.Dir, fmt.Sprintf("q%d", i)), Mode: "write",
			Base: 64, Interval: 10 * time.Millisecond, Disks: []guestvm.Disk{{ID: "vda", Path: filepath.Join(dir, "work.qcow2"), Format: "qcow2"},
				{ID: "vdb", Path: osDisk, Format: "qcow2", ShareRW: true}}})
		must(err)
		_, err = vm.WaitConsole(ctx, "COFFER READY")
		must(err)
		qc, err := qemu.New(qemu.Config{Sockets: []string{vm.QMPPath}, StateDir: filepath.Join(d.Dir, "qs")})
		must(err)
		vms, err := qc.Inventory(ctx)
		must(err)
		s, dt = backupOnce(ctx, newRepo(d.Dir), qc, vms[0].VMRef, "full", "qmp")
		qt, qb = append(qt, dt), s.BytesRead
		vm.Kill()
		<-vm.Exited()
	}
	startDomain()
	r := newRepo(d.Dir)
	full, fullTime := backupOnce(ctx, r, lc, lref, "full", "libvirt")
	// The rewrite goes through QEMU onto vdb's format node (libvirt-N-format,
	// N its source index), which the device shares for writing (share-rw,
	// set through <qemu:override>: libvirt allows <shareable/> on raw only).
	live, err := lv.DomainGetXMLDesc(dom, 0)
	must(err)
	m := regexp.MustCompile(`os\.qcow2'[^>]* index='(\d+)'`).FindStringSubmatch(live)
	if m == nil {
		die("no block node index for vdb in:\n%s", live)
	}
	node := "libvirt-" + m[1] + "-format"
	n := int64(float64(used) * *changed)
	rewrite := func() {
		for done := int64(0); done < n; done += *runSize {
			off := rand.Int64N((used-*runSize)/65536) * 65536
			cmd := fmt.Sprintf("qemu-io %s \"write -P 0x%02x %d %d\"", node, rand.IntN(255)+1, off, *runSize)
			out, err := lv.QEMUDomainMonitorCommand(dom, cmd, 1) // 1: human monitor
			must(err)
			if strings.TrimSpace(out) != "" && !strings.Contains(out, "wrote") {
				die("%s: %s", cmd, out)
			}
		}
	}
	rewrite()
	inc, incTime := backupOnce(ctx, r, lc, lref, "incremental", "libvirt")
	// The change-tracking self-check (internal/backup/changecheck.go): the
	// same rewrite before each incremental, taken alternately without the
	// check and with its default sample.
	var offT, onT, bigT []time.Duration
	var onSample, onRead, bigSpans int64
	variants := []int{-1, 0}
	if *bigSample > 0 {
		variants = append(variants, *bigSample)
	}
	for range *checkRounds {
		for _, spans := range variants {
			rewrite()
			s, dt := backupWith(ctx, r, lc, lref, "incremental", "libvirt", backup.Options{ChangeCheckSpans: spans})
			if spans < 0 {
				offT = append(offT, dt)
				continue
			}
			if spans > 0 {
				bigT = append(bigT, dt)
				for _, d := range s.Disks {
					bigSpans += int64(d.ChangeCheckSpans)
				}
				continue
			}
			onT = append(onT, dt)
			for _, d := range s.Disks {
				onSample += int64(d.ChangeCheckSpans * r.Config().ChunkSize)
				onRead += d.BytesRead
			}
		}
	}
	var vdbRead, vdbSize int64
	for _, disk := range inc.Disks {
		if disk.Key == "vdb" {
			vdbRead, vdbSize = disk.BytesRead, disk.Size
		}
	}

	fmt.Printf("\n%-44s %9s %9s %8s\n", "", "seconds", "MiB/s", "ratio")
	row := func(name string, dt time.Duration, bytes int64, ratio float64) {
		fmt.Printf("%-44s %9.1f %9.0f %7.2fx\n", name, dt.Seconds(), float64(bytes)/(1<<20)/dt.Seconds(), ratio)
	}
	qm, lm := median(qt), median(lt)
	row(fmt.Sprintf("QMP connector, full (median of %d)", *rounds), qm, qb, 1)
	row(fmt.Sprintf("libvirt connector, full (median of %d)", *rounds), lm, lb, lm.Seconds()/qm.Seconds())
	row("libvirt connector, full (incremental's base)", fullTime, full.BytesRead, fullTime.Seconds()/qm.Seconds())
	row(fmt.Sprintf("libvirt connector, incremental (%.0f%% rewritten)", *changed*100), incTime, inc.BytesRead, incTime.Seconds()/qm.Seconds())
	fmt.Printf("\nfull times, QMP: %v; libvirt: %v\n", qt, lt)
	fmt.Printf("incremental: read %.1f MiB of vdb = %.2f%% of the %s disk (%.1f MiB rewritten, %d KiB runs); all disks %.1f MiB\n",
		float64(vdbRead)/(1<<20), 100*float64(vdbRead)/float64(vdbSize), *size, float64(n)/(1<<20), *runSize>>10, float64(inc.BytesRead)/(1<<20))
	if *checkRounds > 0 {
		off, on := median(offT), median(onT)
		fmt.Printf("change-tracking self-check (default sample, %d rounds each, alternating): incremental %.2f s without, %.2f s with (%+.1f%% time); "+
			"the sample read %.1f MiB of %.1f MiB (%.1f%% of the bytes)\n", *checkRounds, off.Seconds(), on.Seconds(),
			100*(on.Seconds()-off.Seconds())/off.Seconds(), float64(onSample)/(1<<20), float64(onRead)/(1<<20), 100*float64(onSample)/float64(onRead))
		fmt.Printf("self-check times, without: %v; with: %v\n", offT, onT)
		if len(bigT) > 0 {
			// The default sample's cost from the large one's: reading and
			// hashing a sampled span costs the same whichever the sample.
			perSpan := (median(bigT) - off) / time.Duration(bigSpans/int64(len(bigT)))
			defSpans := onSample / int64(r.Config().ChunkSize) / int64(len(onT))
			est := perSpan * time.Duration(defSpans)
			fmt.Printf("large sample (%d spans per disk): incremental %.2f s, %v per sampled span; so the default's %d spans cost %v = %.1f%% of the incremental's %.2f s\n",
				*bigSample, median(bigT).Seconds(), perSpan.Round(time.Microsecond), defSpans, est.Round(time.Microsecond), 100*est.Seconds()/off.Seconds(), off.Seconds())
			fmt.Printf("large-sample times: %v\n", bigT)
		}
	}
}

// backupOnce backs the VM up through conn into r, as a policy run does.
func backupOnce(ctx context.Context, r *repo.Repository, conn hypervisor.Connector, ref hypervisor.VMRef, mode, chain string) (*repo.Point, time.Duration) {
	return backupWith(ctx, r, conn, ref, mode, chain, backup.Options{})
}

// backupWith is backupOnce with backup options.
func backupWith(ctx context.Context, r *repo.Repository, conn hypervisor.Connector, ref hypervisor.VMRef, mode, chain string, o backup.Options) (*repo.Point, time.Duration) {
	w, err := r.NewWriter(ctx, "bench")
	must(err)
	defer w.Close(ctx)
	start := time.Now()
	s, err := backup.BackupVM(ctx, w, conn, backup.VMRequest{Connection: chain, VM: ref, Mode: mode, Chain: chain,
		SnapshotMode: hypervisor.CrashConsistent}, o)
	must(err)
	return s, time.Since(start)
}

var repos int

// newRepo is a fresh repository, so no backup deduplicates against another.
func newRepo(dir string) *repo.Repository {
	repos++
	ctx := context.Background()
	st, err := local.Create(filepath.Join(dir, fmt.Sprintf("repo-%d", repos)))
	must(err)
	_, err = repo.Init(ctx, st, repo.InitOptions{Password: []byte(repotest.Password), KDF: repotest.FastKDF})
	must(err)
	r, err := repo.Open(ctx, st, []byte(repotest.Password), repo.Options{})
	must(err)
	return r
}

func domainXML(dir string) string {
	return fmt.Sprintf(`<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>bench</name><memory unit='MiB'>256</memory><vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><kernel>%[1]s/vmlinuz</kernel><initrd>%[1]s/initrd.gz</initrd>
    <cmdline>`+guestvm.KernelArgs+` coffer.mode=write coffer.base=64 coffer.interval=10</cmdline></os>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='%[1]s/work.qcow2'/><target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='%[1]s/os.qcow2'/><target dev='vdb' bus='virtio'/><alias name='ua-os'/></disk>
    <serial type='file'><source path='%[1]s/console.log' append='on'/><target port='0'/></serial>
  </devices>
  <qemu:override><qemu:device alias='ua-os'><qemu:frontend>
    <qemu:property name='share-rw' type='bool' value='true'/>
  </qemu:frontend></qemu:device></qemu:override>
</domain>`, dir)
}

// buildOSDisk makes a qcow2 ext4 image filled from dirs and returns the
// bytes its data occupies.
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
	var m []struct {
		Length int64 `json:"length"`
		Data   bool  `json:"data"`
		Offset int64 `json:"offset"`
	}
	b, err := exec.Command("qemu-img", "map", "--output=json", out).Output()
	must(err)
	must(json.Unmarshal(b, &m))
	var end int64
	for _, e := range m {
		if e.Data {
			end = max(end, e.Offset+e.Length)
		}
	}
	return end
}

func consoleLen(path string) int {
	b, _ := os.ReadFile(path)
	return len(b)
}

func waitConsole(ctx context.Context, path string, from int, s string) {
	for {
		if b, _ := os.ReadFile(path); len(b) >= from && bytes.Contains(b[from:], []byte(s)) {
			return
		}
		if ctx.Err() != nil {
			die("guest did not print %q", s)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func run(name string, args ...string) {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		die("%s %v: %v\n%s", name, args, err, out)
	}
}

// atExit stops the private libvirtd and its guest when the run dies.
var atExit = func() {}

func die(format string, a ...any) {
	atExit()
	log.Fatalf(format, a...)
}

func must(err error) {
	if err != nil {
		die("%v", err)
	}
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// libvirtGuest is a guest that keeps writing self-verifying blocks
// (web-1, one 32 MiB qcow2 disk), defined and started under a private
// libvirtd.
type libvirtGuest struct {
	d    *testutil.Libvirtd
	disk string // its disk image
	// virsh runs virsh on the daemon; wait waits for the console to print
	// s after byte from and returns where s ends.
	virsh func(args ...string) string
	wait  func(s string, from int) int
}

func startLibvirtGuest(t *testing.T, ctx context.Context) *libvirtGuest {
	t.Helper()
	d := testutil.StartLibvirtd(t)
	testutil.RequireBinary(t, "virsh")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	virsh := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("virsh", append([]string{"-c", d.URI}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %v: %v %s", args, err, out)
		}
		return string(out)
	}
	vmDir := filepath.Join(d.Dir, "vm")
	os.MkdirAll(vmDir, 0o755)
	for src, dst := range map[string]string{img.Kernel: "vmlinuz", img.Initrd: "initrd.gz"} {
		b, _ := os.ReadFile(src)
		os.WriteFile(filepath.Join(vmDir, dst), b, 0o644)
	}
	disk := filepath.Join(vmDir, "vda.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	d.ChownAll(vmDir)
	console := filepath.Join(vmDir, "console.log")
	def := filepath.Join(d.Dir, "web-1.xml")
	os.WriteFile(def, []byte(fmt.Sprintf(`<domain type='qemu'><name>web-1</name><memory unit='MiB'>256</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type><kernel>%[1]s/vmlinuz</kernel><initrd>%[1]s/initrd.gz</initrd>
<cmdline>%[4]s coffer.mode=write coffer.base=64 coffer.interval=15</cmdline></os>
<devices><disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='%[2]s'/><target dev='vda' bus='virtio'/></disk>
<serial type='file'><source path='%[3]s'/><target port='0'/></serial></devices></domain>`, vmDir, disk, console, guestvm.KernelArgs)), 0o644)
	virsh("define", def)
	virsh("start", "web-1")
	wait := func(s string, from int) int {
		t.Helper()
		for {
			b, _ := os.ReadFile(console)
			if i := bytes.Index(b[min(from, len(b)):], []byte(s)); i >= 0 {
				return min(from, len(b)) + i + len(s)
			}
			if ctx.Err() != nil || bytes.Contains(b, []byte("Kernel panic")) {
				t.Fatalf("guest did not print %q:\n%s", s, b)
			}
			time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	return &libvirtGuest{d: d, disk: disk, virsh: virsh, wait: wait}
}

// image is the guest's disk as it is now, as a raw image at path: the
// truth a point taken while the guest is suspended must restore to.
func (g *libvirtGuest) image(t *testing.T, path string) []byte {
	t.Helper()
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", g.disk, path).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTwoChainsOnLibvirt drives a writing guest under a private libvirtd
// through the job engine with two policies to two repositories, run
// interleaved: each chain has checkpoints of its own (named after policy
// and repository, listed by virsh), each incremental reads less than its
// full, and the second chain's incremental, taken right after the first
// chain's, restores equal to the disk at its instant: it diffed against its
// own last point, not the other chain's.
func TestTwoChainsOnLibvirt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := startLibvirtGuest(t, ctx)
	d, virsh, wait, disk := g.d, g.virsh, g.wait, g.disk
	at := wait("COFFER READY", 0)

	e := newEnv(t)
	e.must("init")
	offsite := filepath.Join(e.dir, "offsite")
	local := e.vars["COFFER_REPO"]
	e.vars["COFFER_REPO"] = offsite
	e.must("init")
	e.vars["COFFER_REPO"] = local
	e.config(fmt.Sprintf(`
state-dir: %s
connections:
  - name: lv
    kind: libvirt
    options: {uri: "%s", state-dir: %s}
repositories:
  - {name: offsite, location: %s}
policies:
  - {name: local, connection: lv, select: {names: ["web-*"]}}
  - {name: nightly, connection: lv, repository: offsite, select: {names: ["web-*"]}}
`, filepath.Join(e.dir, "state"), d.URI, filepath.Join(d.Dir, "st"), offsite))

	inv := vmsJSON(t, e)
	if len(inv) != 1 || inv[0].VM != "web-1" || inv[0].ProvisionedBytes != 32<<20 || len(inv[0].Policies) != 2 {
		t.Fatalf("vms: %+v", inv)
	}
	run := func(policy, wantMode string) api.VMTask {
		t.Helper()
		var res api.Job
		out := e.must("run", policy, "--json")
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != "success" || len(res.Tasks) != 1 || res.Tasks[0].Mode != wantMode {
			t.Fatalf("run %s: %v %s", policy, err, out)
		}
		return res.Tasks[0]
	}
	fullLocal := run("local", "full")
	fullNightly := run("nightly", "full")
	wait("COFFER WROTE", at)
	incLocal := run("local", "incremental")
	if incLocal.ReadBytes >= fullLocal.ReadBytes {
		t.Fatalf("local incremental read %d bytes, its full %d", incLocal.ReadBytes, fullLocal.ReadBytes)
	}
	// nightly's incremental right after local's, with the guest paused:
	// only nightly's own checkpoint holds the writes before local's.
	virsh("suspend", "web-1")
	truth := filepath.Join(e.dir, "truth.raw")
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", disk, truth).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	incNightly := run("nightly", "incremental")
	virsh("resume", "web-1")
	if incNightly.ReadBytes >= fullNightly.ReadBytes {
		t.Fatalf("nightly incremental read %d bytes, its full %d", incNightly.ReadBytes, fullNightly.ReadBytes)
	}
	e.vars["COFFER_REPO"] = offsite
	restored := filepath.Join(e.dir, "restored.raw")
	e.must("restore", incNightly.PointID, "--to", restored)
	e.vars["COFFER_REPO"] = local
	want, _ := os.ReadFile(truth)
	if got, _ := os.ReadFile(restored); !bytes.Equal(got, want) {
		t.Fatal("nightly's incremental differs from the disk at its instant")
	}
	cps := strings.Fields(virsh("checkpoint-list", "--name", "web-1"))
	var localCps, nightlyCps int
	for _, c := range cps {
		switch {
		case strings.HasPrefix(c, "coffer-local_default."):
			localCps++
		case strings.HasPrefix(c, "coffer-nightly_offsite."):
			nightlyCps++
		default:
			t.Errorf("checkpoint %s is no chain's", c)
		}
	}
	if localCps != 2 || nightlyCps != 2 { // each chain's full anchor and latest incremental
		t.Fatalf("checkpoints %v", cps)
	}

	// What libvirt cannot do is refused before a run.
	e.config(fmt.Sprintf(`
connections:
  - {name: lv, kind: libvirt, options: {uri: "%s"}}
policies:
  - {name: mem, connection: lv, snapshot: with-memory}
`, d.URI))
	if out := e.expect(ExitUsage, "policy", "check", "--offline"); !strings.Contains(out, "saves no memory state") {
		t.Fatalf("policy check of with-memory on libvirt: %s", out)
	}
}

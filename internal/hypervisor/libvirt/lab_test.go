package libvirt_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/testutil"
)

const (
	domName = "web-1"
	domUUID = "5f0c2a8e-6d3b-4b1f-9c2e-7a1d0e4b8c31"
)

// lab is a private libvirtd with one writing TCG guest (a qcow2 disk vda
// the workload writes, a raw disk vdb, a guest agent), a storage pool
// holding the disks, a repository and a connector.
type lab struct {
	t     *testing.T
	ctx   context.Context
	d     *testutil.Libvirtd
	admin *golibvirt.Libvirt // the test's own connection, as an administrator's
	dom   golibvirt.Domain
	conn  *libvirt.Connector
	repos map[string]*repo.Repository // per chain: a chain is a policy and a repository
	ref   hypervisor.VMRef
	dir   string // disks, kernel, console log
	state string
	mode  string // the guest's workload mode (guestvm)
}

// startLab starts the lab with a guest that writes all the time.
func startLab(t *testing.T) *lab { return startLabMode(t, "write", "COFFER READY") }

// startLabMode starts the lab with the guest's workload in mode, once the
// guest printed ready.
func startLabMode(t *testing.T, mode, ready string) *lab {
	testutil.RequireBinary(t, "virsh")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	l := &lab{t: t, ctx: ctx, d: testutil.StartLibvirtd(t), mode: mode}
	l.dir = filepath.Join(l.d.Dir, "vm")
	l.state = filepath.Join(l.d.Dir, "st")
	os.MkdirAll(l.dir, 0o755)
	// The daemon's QEMU runs as nobody: it gets copies of what it reads.
	for src, dst := range map[string]string{img.Kernel: "vmlinuz", img.Initrd: "initrd.gz"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(l.dir, dst), b, 0o644)
	}
	for _, d := range [][2]string{{"vda.qcow2", "qcow2"}, {"vdb.raw", "raw"}} {
		if out, err := exec.Command(qemuImg, "create", "-q", "-f", d[1], filepath.Join(l.dir, d[0]), "32M").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	if err := l.d.ChownAll(l.dir); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(l.d.URI)
	if l.admin, err = golibvirt.ConnectToURI(u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.admin.Disconnect() })
	pool := fmt.Sprintf(`<pool type='dir'><name>images</name><target><path>%s</path></target></pool>`, l.dir)
	p, err := l.admin.StoragePoolDefineXML(pool, 0)
	if err == nil {
		err = l.admin.StoragePoolCreate(p, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	if l.dom, err = l.admin.DomainDefineXML(l.domainXML()); err != nil {
		t.Fatal(err)
	}
	if err := l.admin.DomainCreate(l.dom); err != nil {
		t.Fatal(err)
	}
	l.waitConsole(ready, 0)
	l.waitAgent()
	if l.conn, err = libvirt.New(libvirt.Config{URI: l.d.URI, StateDir: l.state}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.conn.Close() })
	l.repos = map[string]*repo.Repository{}
	l.ref = hypervisor.VMRef{ID: domUUID, Name: domName}
	return l
}

func (l *lab) domainXML() string {
	return fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name><uuid>%s</uuid>
  <memory unit='MiB'>256</memory><vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><kernel>%[3]s/vmlinuz</kernel><initrd>%[3]s/initrd.gz</initrd>
    <cmdline>%[4]s coffer.mode=%[5]s coffer.base=64 coffer.interval=15 coffer.qga=1</cmdline></os>
  <features><acpi/></features><on_reboot>destroy</on_reboot>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='%[3]s/vda.qcow2'/><target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='%[3]s/vdb.raw'/><target dev='vdb' bus='virtio'/></disk>
    <serial type='file'><source path='%[3]s/console.log' append='on'/><target port='0'/></serial>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
  </devices>
</domain>`, domName, domUUID, l.dir, guestvm.KernelArgs, l.mode)
}

// console is what the guest printed so far.
func (l *lab) console() string {
	b, _ := os.ReadFile(filepath.Join(l.dir, "console.log"))
	return string(b)
}

// waitConsole waits until the console holds s after byte from, and
// returns the console's length then.
func (l *lab) waitConsole(s string, from int) int {
	l.t.Helper()
	for {
		c := l.console()
		if strings.Contains(c, "Kernel panic") {
			l.t.Fatalf("guest panicked while waiting for %q:\n%s", s, c)
		}
		if from <= len(c) {
			if i := strings.Index(c[from:], s); i >= 0 {
				return from + i + len(s)
			}
		}
		if l.ctx.Err() != nil {
			l.t.Fatalf("guest did not print %q:\n%s", s, c)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waitAgent waits until the guest agent answers through libvirt. The
// guest starts it in the background just before its workload prints
// ready, so it may connect later; connecting while a test's backup job
// holds the domain's lock, libvirt's event handler times out and libvirt
// then says no agent is connected (CI caught a quiesced snapshot achieve
// crash-consistent so).
func (l *lab) waitAgent() {
	l.t.Helper()
	for {
		_, err := l.admin.QEMUDomainAgentCommand(l.dom, `{"execute":"guest-ping"}`, 5, 0)
		if err == nil {
			return
		}
		if l.ctx.Err() != nil {
			l.t.Fatalf("the guest agent never answered through libvirt: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waitWrites waits until the guest reports n more batches of writes.
func (l *lab) waitWrites(n int) {
	l.t.Helper()
	at := len(l.console())
	for i := 0; i < n; i++ {
		at = l.waitConsole("COFFER WROTE", at)
	}
}

// repo is the repository of a chain.
func (l *lab) repo(chain string) *repo.Repository {
	if l.repos[chain] == nil {
		l.repos[chain] = repotest.New(l.t, repo.InitOptions{})
	}
	return l.repos[chain]
}

func (l *lab) backup(chain, mode string, sm hypervisor.SnapshotMode) (*repo.Point, error) {
	return l.backupThrough(l.conn, chain, mode, sm)
}

// backupThrough backs up through conn, the lab's connector or a wrapper.
func (l *lab) backupThrough(conn hypervisor.Connector, chain, mode string, sm hypervisor.SnapshotMode) (*repo.Point, error) {
	return backuptest.BackupVM(l.t, l.repo(chain), conn, backup.VMRequest{Connection: "lab", VM: l.ref, Mode: mode,
		SnapshotMode: sm, Quiesce: hypervisor.QuiesceRequired, Chain: chain, Tags: map[string]string{"chain": chain}})
}

// restoreDisk restores one disk of a point to a raw file and reads it.
func (l *lab) restoreDisk(s *repo.Point, key string) []byte {
	l.t.Helper()
	for _, d := range s.Disks {
		if d.Key == key {
			out := filepath.Join(l.t.TempDir(), key+".raw")
			if _, err := restore.ToFile(l.ctx, l.repos[s.Tags["chain"]], s, d, out, restore.FileOptions{}); err != nil {
				l.t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				l.t.Fatal(err)
			}
			return b
		}
	}
	l.t.Fatalf("no disk %s in %s", key, s.ID)
	return nil
}

// checkWorkload verifies the workload's blocks on a restored vda.
func (l *lab) checkWorkload(img []byte) guestvm.Report {
	l.t.Helper()
	rep, err := guestvm.CheckDisk(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		l.t.Fatalf("restored disk is not consistent: %v", err)
	}
	return rep
}

// liveImage is vda as it is now, read past QEMU's lock (the domain must be
// paused).
func (l *lab) liveImage() []byte {
	l.t.Helper()
	out := filepath.Join(l.t.TempDir(), "vda.live")
	if b, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", filepath.Join(l.dir, "vda.qcow2"), out).CombinedOutput(); err != nil {
		l.t.Fatalf("%v %s", err, b)
	}
	b, _ := os.ReadFile(out)
	return b
}

// checkpoints is what `virsh checkpoint-list --name` shows, sorted.
func (l *lab) checkpoints() []string {
	l.t.Helper()
	out, err := exec.Command("virsh", "-c", l.d.URI, "checkpoint-list", "--name", domName).CombinedOutput()
	if err != nil {
		l.t.Fatalf("virsh checkpoint-list: %v %s", err, out)
	}
	names := strings.Fields(string(out))
	sort.Strings(names)
	return names
}

// virsh runs a virsh command on the lab's daemon.
func (l *lab) virsh(args ...string) string {
	l.t.Helper()
	out, err := exec.Command("virsh", append([]string{"-c", l.d.URI}, args...)...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("virsh %v: %v %s", args, err, out)
	}
	return string(out)
}

// assertClean checks that no backup job runs, the domain runs, and coffer
// left no journal, socket or scratch file.
func (l *lab) assertClean() {
	l.t.Helper()
	if _, err := l.admin.DomainBackupGetXMLDesc(l.dom, 0); err == nil {
		l.t.Fatal("a backup job is still running")
	}
	st, _, err := l.admin.DomainGetState(l.dom, 0)
	if err != nil || golibvirt.DomainState(st) != golibvirt.DomainRunning {
		l.t.Fatalf("domain state %d %v", st, err)
	}
	l.assertNoSessionFiles()
}

// assertNoSessionFiles checks that coffer left no journal, socket or
// scratch file, nor a qemu-nbd of its own on the lab's images.
func (l *lab) assertNoSessionFiles() {
	l.t.Helper()
	for _, sub := range []string{"journal", "sockets"} {
		if ents, _ := os.ReadDir(filepath.Join(l.state, sub)); len(ents) != 0 {
			l.t.Fatalf("leftover files in %s: %v", sub, ents)
		}
	}
	if out, err := exec.Command("pgrep", "-f", "qemu-nbd.*"+l.dir).CombinedOutput(); err == nil {
		l.t.Fatalf("a qemu-nbd still serves the lab's images: %s", out)
	}
}

// chainCheckpoints are the listed checkpoints of one chain.
func chainCheckpoints(all []string, chain string) []string {
	var out []string
	for _, n := range all {
		if strings.HasPrefix(n, "coffer-"+chain+".") {
			out = append(out, n)
		}
	}
	return out
}

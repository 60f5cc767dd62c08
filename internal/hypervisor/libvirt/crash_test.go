package libvirt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
)

// crashChild is the coffer process the kill loop kills: it starts a
// session of chain a and dies by SIGKILL at the step it is told.
func crashChild(t *testing.T, step string) {
	libvirt.SetCrashPoint(func(s string) {
		if s == step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	conn, err := libvirt.New(libvirt.Config{URI: os.Getenv("COFFER_TEST_URI"), StateDir: os.Getenv("COFFER_TEST_STATE")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if step == "restoring" {
		var cfg hypervisor.VMConfig
		b, _ := os.ReadFile(os.Getenv("COFFER_TEST_CONFIG"))
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		nv, err := conn.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: "web-1-killed", Datastore: "images"})
		if err != nil {
			t.Fatal(err)
		}
		if err := nv.WriteDisk(ctx, "vdb", zeroDisk(32<<20)); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL) // vda not written yet
	}
	req := hypervisor.SnapshotRequest{SessionID: "killed-" + step, Chain: "a", Track: true,
		Mode: hypervisor.SnapshotMode(os.Getenv("COFFER_TEST_MODE")), Quiesce: hypervisor.QuiesceRequired,
		Since: map[string]string{"vda": os.Getenv("COFFER_TEST_SINCE")}, Hold: step == "held"}
	s, err := conn.Snapshot(ctx, hypervisor.VMRef{ID: domUUID}, req)
	if err != nil {
		t.Fatal(err)
	}
	switch step {
	case "held": // paused and frozen for a storage snapshot
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "reading":
		r, err := s.OpenDisk(ctx, "vda")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadAt(make([]byte, 1<<20), 0); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "committed":
		s.Close(ctx, true)
	}
	t.Fatalf("not killed at %s", step)
}

// TestKilledCofferCleanedUp kills coffer (SIGKILL) at every step where it
// leaves something on the domain: journalled only, frozen or paused with
// the backup job started, held for a storage snapshot (paused and frozen),
// while reading, and after the point was
// committed. The next CleanupLeftovers thaws, resumes, aborts the job and
// deletes the checkpoint the dead session journalled (keeping it once its
// point was committed); the administrator's checkpoint and the other
// chain's are untouched, and the next incremental is still right.
func TestKilledCofferCleanedUp(t *testing.T) {
	if step := os.Getenv("COFFER_TEST_CRASH_STEP"); step != "" {
		crashChild(t, step)
		return
	}
	l := startLab(t)
	full, err := l.backup("a", "full", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.backup("b", "full", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	l.virsh("checkpoint-create-as", domName, "admin-keep", "--diskspec", "vda,checkpoint=bitmap", "--diskspec", "vdb,checkpoint=no")
	since := ""
	for _, d := range full.Disks {
		if d.Key == "vda" {
			since = d.ChangeToken
		}
	}
	steps := []struct {
		step string
		mode hypervisor.SnapshotMode
	}{
		{"journalled", hypervisor.Quiesced}, {"begun", hypervisor.Quiesced}, {"begun", hypervisor.Suspend}, {"held", hypervisor.Quiesced},
		{"reading", hypervisor.CrashConsistent}, {"committed", hypervisor.CrashConsistent},
	}
	for _, s := range steps {
		before := l.checkpoints()
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledCofferCleanedUp$", "-test.count=1")
		cmd.Env = append(os.Environ(), "COFFER_TEST_CRASH_STEP="+s.step, "COFFER_TEST_MODE="+string(s.mode),
			"COFFER_TEST_URI="+l.d.URI, "COFFER_TEST_STATE="+l.state, "COFFER_TEST_SINCE="+since)
		out, err := cmd.CombinedOutput()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("%s: child did not die by signal: %v\n%s", s.step, err, out)
		}
		if ents, _ := os.ReadDir(filepath.Join(l.state, "journal")); len(ents) != 1 {
			t.Fatalf("%s: expected the killed session's journal, found %v", s.step, ents)
		}
		left, err := l.conn.CleanupLeftovers(l.ctx)
		if err != nil {
			t.Fatalf("%s: cleanup: %v", s.step, err)
		}
		if len(left) == 0 {
			t.Fatalf("%s: cleanup reported nothing", s.step)
		}
		l.assertClean() // no job, the domain running, no files
		after := l.checkpoints()
		if s.step == "committed" {
			// The committed point's checkpoint stays (its token is in the
			// point); nothing else changed.
			added := slices.DeleteFunc(slices.Clone(after), func(n string) bool { return slices.Contains(before, n) })
			if len(added) != 1 || !strings.Contains(added[0], "-inc-") || len(after) != len(before)+1 {
				t.Fatalf("%s: checkpoints %v, before %v", s.step, after, before)
			}
		} else if !slices.Equal(after, before) {
			t.Fatalf("%s: checkpoints %v, before %v", s.step, after, before)
		}
		if !slices.Contains(after, "admin-keep") || len(chainCheckpoints(after, "b")) != 1 {
			t.Fatalf("%s: cleanup touched checkpoints that are not its own: %v", s.step, after)
		}
		l.waitWrites(1) // thawed and resumed: the guest writes on
		t.Logf("%s (%s): cleaned %+v", s.step, s.mode, left)
	}
	// A restore to a new domain killed between its disks: the domain and
	// its files go at the next cleanup.
	cfgFile := filepath.Join(l.d.Dir, "config.json")
	os.WriteFile(cfgFile, full.VMConfig, 0o600)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledCofferCleanedUp$", "-test.count=1")
	cmd.Env = append(os.Environ(), "COFFER_TEST_CRASH_STEP=restoring", "COFFER_TEST_CONFIG="+cfgFile,
		"COFFER_TEST_URI="+l.d.URI, "COFFER_TEST_STATE="+l.state)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("restoring: child did not die by signal: %v\n%s", err, out)
	}
	if _, err := l.admin.DomainLookupByName("web-1-killed"); err != nil {
		t.Fatalf("the killed restore defined no domain: %v", err)
	}
	left, err := l.conn.CleanupLeftovers(l.ctx)
	if err != nil || len(left) != 1 || left[0].Kind != "restored-vm" {
		t.Fatalf("cleanup after a killed restore: %+v %v", left, err)
	}
	if _, err := l.admin.DomainLookupByName("web-1-killed"); err == nil {
		t.Fatal("the killed restore's domain is still defined")
	}
	if m, _ := filepath.Glob(filepath.Join(l.dir, "web-1-killed*")); len(m) != 0 {
		t.Fatalf("the killed restore left %v", m)
	}
	l.assertClean()

	// Chain a's next incremental, from its full, is right.
	if err := l.admin.DomainSuspend(l.dom); err != nil {
		t.Fatal(err)
	}
	truth := l.liveImage()
	inc, err := l.backup("a", "incremental", hypervisor.CrashConsistent)
	if rerr := l.admin.DomainResume(l.dom); err != nil || rerr != nil {
		t.Fatal(err, rerr)
	}
	for _, d := range inc.Disks {
		if d.Key == "vda" && d.Mode != "incremental" {
			t.Fatalf("vda after the crashes read %s: %s", d.Mode, d.Warning)
		}
	}
	if got := l.restoreDisk(inc, "vda"); !bytes.Equal(got, truth) {
		t.Fatal("incremental after the crashes differs from the disk at its instant")
	}
	l.assertClean()
}

// zeroDisk is a restore source of size bytes with one allocated, all-zero
// range.
type zeroDisk int64

func (z zeroDisk) ReadAt(p []byte, off int64) (int, error) { clear(p); return len(p), nil }
func (z zeroDisk) Size() int64                             { return int64(z) }
func (z zeroDisk) Allocated() []hypervisor.Extent {
	return []hypervisor.Extent{{Offset: 0, Length: 1 << 20}}
}

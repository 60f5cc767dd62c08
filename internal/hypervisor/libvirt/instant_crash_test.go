package libvirt_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
)

// instantCrashChild starts (or commits) an instant recovery's domain and
// dies by SIGKILL at step; the parent serves the point.
func instantCrashChild(t *testing.T, step string) {
	libvirt.SetCrashPoint(func(s string) {
		if s == step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	conn, err := libvirt.New(libvirt.Config{URI: os.Getenv("COFFER_TEST_URI"), StateDir: os.Getenv("COFFER_TEST_STATE")})
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Config hypervisor.VMConfig
		Opts   hypervisor.InstantOptions
		VM     hypervisor.InstantVM
	}
	b, _ := os.ReadFile(os.Getenv("COFFER_TEST_CONFIG"))
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if step == "instant-started" {
		_, err = conn.InstantStart(ctx, in.Config, in.Opts)
	} else {
		_, err = conn.InstantCommit(ctx, in.VM, "images", "qcow2")
	}
	t.Fatalf("not killed at %s: %v", step, err)
}

// TestKilledInstantCleanedUp kills coffer (SIGKILL) while it starts an
// instant recovery's domain (the next cleanup removes the domain and its
// overlays), while a disk is being copied, and after one disk switched to
// its copy (cleanup aborts the copy jobs that did not finish and removes
// their files; the domain runs on and a second commit finishes the move).
func TestKilledInstantCleanedUp(t *testing.T) {
	if step := os.Getenv("COFFER_TEST_CRASH_STEP"); step != "" {
		instantCrashChild(t, step)
		return
	}
	il := startInstantLab(t)
	sizes := map[string]int64{}
	for _, d := range il.point.Disks {
		sizes[d.Key] = d.Size
	}
	kill := func(step string, vm hypervisor.InstantVM) []hypervisor.Leftover {
		t.Helper()
		cfgFile := filepath.Join(il.d.Dir, "instant.json")
		b, _ := json.Marshal(map[string]any{"Config": il.cfg, "VM": vm,
			"Opts": hypervisor.InstantOptions{Name: "web-1-killed", Socket: il.socket, Sizes: sizes}})
		os.WriteFile(cfgFile, b, 0o600)
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledInstantCleanedUp$", "-test.count=1")
		cmd.Env = append(os.Environ(), "COFFER_TEST_CRASH_STEP="+step, "COFFER_TEST_CONFIG="+cfgFile,
			"COFFER_TEST_URI="+il.d.URI, "COFFER_TEST_STATE="+il.state)
		out, err := cmd.CombinedOutput()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("%s: child did not die by signal: %v\n%s", step, err, out)
		}
		if ents, _ := os.ReadDir(filepath.Join(il.state, "journal")); len(ents) != 1 {
			t.Fatalf("%s: expected the killed step's journal, found %v", step, ents)
		}
		left, err := il.conn.CleanupLeftovers(il.ctx)
		if err != nil || len(left) == 0 {
			t.Fatalf("%s: cleanup: %+v %v", step, left, err)
		}
		il.assertNoJournal()
		t.Logf("%s: cleaned %+v", step, left)
		return left
	}

	kill("instant-started", hypervisor.InstantVM{})
	if _, err := il.admin.DomainLookupByName("web-1-killed"); err == nil {
		t.Fatal("the killed start's domain is still defined")
	}
	if m, _ := filepath.Glob(filepath.Join(il.dir, "web-1-killed*")); len(m) != 0 {
		t.Fatalf("the killed start left %v", m)
	}

	vm := il.start("web-1-instant")
	for _, step := range []string{"instant-copying", "instant-pivoted"} {
		kill(step, vm)
		running, err := il.conn.InstantRunning(il.ctx, vm.Ref)
		if err != nil || !running {
			t.Fatalf("%s: the domain stopped: %v", step, err)
		}
		xml := il.virsh("dumpxml", "web-1-instant")
		if !strings.Contains(xml, "nbd") {
			t.Fatalf("%s: no disk runs from the backup any more:\n%s", step, xml)
		}
		if strings.Contains(xml, "<mirror") {
			t.Fatalf("%s: a copy job is left:\n%s", step, xml)
		}
		il.waitWrites(1)
	}
	// The second commit skips the disk that switched and moves the other.
	targets, err := il.conn.InstantCommit(il.ctx, vm, "images", "qcow2")
	if err != nil {
		t.Fatal(err)
	}
	xml := il.virsh("dumpxml", "web-1-instant")
	for _, p := range targets {
		if !strings.Contains(xml, "file='"+p+"'") {
			t.Fatalf("%s not in use:\n%s", p, xml)
		}
	}
	if strings.Contains(xml, "nbd") {
		t.Fatalf("the committed domain still uses the backup:\n%s", xml)
	}
	il.assertNoJournal()
	il.stopServing()
	il.waitWrites(1)
}

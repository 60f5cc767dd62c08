package failover

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/guestvm"
)

// TestRehearsalKeepsOrderAndLeavesNothing runs a test failover of three
// VMs in two groups from their standbys: every VM of the first group
// passes its probe before any VM of the second starts, the two VMs of
// the second start at once (their start steps overlap in time), the
// report lists the steps per VM in plan order, every probe passes, the source guests are never paused, a VM re-addressed through
// its guest agent reports its new address (and keeps the isolated
// network's, which its probe reaches), and afterwards no QEMU of
// the run is alive, the run directory is gone and the standbys' files
// are byte for byte as before. The state directory's path is too long
// for a socket: the VMs' sockets went in a short directory, gone too.
func TestRehearsalKeepsOrderAndLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := newSite(t, ctx, 3, "boot")
	var vms []VM
	for i := range 3 {
		_, vm := s.replicate(i)
		vms = append(vms, vm)
	}
	before := tree(t, filepath.Join(s.dir, "dr"))
	pauses := make([]func() int, 3)
	for i := range 3 {
		pauses[i] = s.watchPauses(i)
	}
	probe := bootverify.Probe{Kind: bootverify.ProbeHTTP, Port: guestvm.BootProbePort, Path: "/", Status: 200}
	script := filepath.Join(t.TempDir(), "after.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$COFFER_VM up, port $COFFER_PORT_8080, dir $COFFER_VM_DIR\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	vms[0].Script = script
	// web-2 is re-addressed through its guest agent: beside the isolated
	// network's address, which its probe's forward still reaches.
	vms[2].AgentAddress, vms[2].AgentGateway = "10.20.0.12/24", "10.20.0.1"
	plan := Plan{Name: "shop", Groups: []Group{
		{VMs: vms[:1], Probes: []bootverify.Probe{probe}, ProbeTimeout: 4 * time.Minute},
		{VMs: vms[1:], Probes: []bootverify.Probe{probe}, ProbeTimeout: 4 * time.Minute},
	}}
	// A state directory too long for a socket's path: the VMs' sockets
	// go in short directories of their own.
	state := filepath.Join(t.TempDir(), strings.Repeat("long-state-dir-", 6))
	rep, err := Rehearse(ctx, plan, RehearseOptions{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || len(rep.Probes) != 3 {
		t.Fatalf("the rehearsal failed: %+v", rep)
	}
	firstReady, sockets := time.Time{}, ""
	for _, p := range rep.Probes {
		if !p.Passed || !strings.Contains(p.Evidence, "HTTP 200") {
			t.Fatalf("probe %+v", p)
		}
	}
	for _, st := range rep.Steps {
		if st.Error != "" {
			t.Fatalf("step %+v", st)
		}
		if st.Group == 1 && st.Name == "script" {
			firstReady = st.Started.Add(st.Duration)
			var ok bool
			if _, sockets, ok = strings.Cut(st.Detail, ", dir "); !strings.Contains(st.Detail, "web-0 up, port ") || !ok {
				t.Fatalf("the script's output: %q", st.Detail)
			}
		}
	}
	wantReaddressed(t, rep, "web-2", "10.20.0.12/24")
	if firstReady.IsZero() {
		t.Fatalf("no script step for group 1: %+v", rep.Steps)
	}
	for _, st := range rep.Steps {
		if st.Group == 2 && st.Name == "start" && st.Started.Before(firstReady) {
			t.Fatalf("%s of group 2 started at %s, before group 1 was ready at %s", st.VM, st.Started, firstReady)
		}
	}
	wantOverlap(t, rep, 2, "web-1", "web-2")
	want := []string{"1 web-0 start", "1 web-0 script", "2 web-1 start", "2 web-2 start", "2 web-2 readdress", "0  discard"}
	if got := stepNames(rep); !slices.Equal(got, want) {
		t.Fatalf("the steps %q, not %q", got, want)
	}
	for i := range 3 {
		if n := pauses[i](); n != 0 {
			t.Errorf("source web-%d was paused %d time(s) during the test failover", i, n)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(rehearsalRoot(state), "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if _, err := os.Stat(sockets); !os.IsNotExist(err) {
		t.Fatalf("the VM's socket directory %s is left: %v", sockets, err)
	}
	if procs := qemusUnder(state); len(procs) != 0 {
		t.Fatalf("QEMU processes of the test failover still run: %v", procs)
	}
	if after := tree(t, filepath.Join(s.dir, "dr")); after != before {
		t.Fatalf("the standbys changed:\nbefore %s\nafter  %s", before, after)
	}
}

// wantOverlap wants the start steps of VMs a and b of group n to
// overlap in time: they started at once.
func wantOverlap(t *testing.T, rep *Report, n int, a, b string) {
	t.Helper()
	var sa, sb *Step
	for i, st := range rep.Steps {
		if st.Group == n && st.Name == "start" {
			switch st.VM {
			case a:
				sa = &rep.Steps[i]
			case b:
				sb = &rep.Steps[i]
			}
		}
	}
	if sa == nil || sb == nil {
		t.Fatalf("no start steps of %s and %s in group %d: %+v", a, b, n, rep.Steps)
	}
	t.Logf("%s started at +0 for %s, %s at %+v for %s", a, sa.Duration, b, sb.Started.Sub(sa.Started), sb.Duration)
	if !sa.Started.Before(sb.Started.Add(sb.Duration)) || !sb.Started.Before(sa.Started.Add(sa.Duration)) {
		t.Fatalf("%s (%s for %s) and %s (%s for %s) did not start at once", a, sa.Started, sa.Duration, b, sb.Started, sb.Duration)
	}
}

// stepNames is each step of rep as "GROUP VM NAME".
func stepNames(rep *Report) []string {
	var out []string
	for _, st := range rep.Steps {
		out = append(out, fmt.Sprintf("%d %s %s", st.Group, st.VM, st.Name))
	}
	return out
}

// wantReaddressed wants vm's re-addressing step to report the address
// the guest agent read back, beside the isolated network's.
func wantReaddressed(t *testing.T, rep *Report, vm, address string) {
	t.Helper()
	for _, st := range rep.Steps {
		if st.VM == vm && st.Name == "readdress" {
			t.Logf("re-addressing through the guest agent: %s in %s", st.Detail, st.Duration)
			if strings.HasPrefix(st.Detail, "eth0 has "+address+", as the guest agent reports it") && strings.Contains(st.Detail, "10.0.2.15/24") {
				return
			}
		}
	}
	t.Fatalf("%s was not re-addressed through its guest agent: %+v", vm, rep.Steps)
}

// tree is every file under dir with its mode and content hash.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		fmt.Fprintf(&b, "%s %v %x\n", strings.TrimPrefix(p, dir), fi.Mode(), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// qemusUnder lists the processes whose command line names a path under dir.
func qemusUnder(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

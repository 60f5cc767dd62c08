package failover

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRehearsalGroupWithAFailedStartLeavesNothing runs a test failover
// whose first group has three VMs, the second of which cannot start (its
// cloud-init directory does not exist, found once its overlay and socket
// directory are made): the other two start beside it (their start steps
// overlap), the report lists the group's starts in plan order, the
// second group never starts, and at the end every VM that started is
// stopped, the run directory and every socket directory (the failed
// VM's too) are gone and the standbys' files are as before.
func TestRehearsalGroupWithAFailedStartLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := newSite(t, ctx, 3, "boot")
	var vms []VM
	for i := range 3 {
		_, vm := s.replicate(i)
		vms = append(vms, vm)
	}
	before := tree(t, filepath.Join(s.dir, "dr"))
	vms[1].CloudInit = filepath.Join(t.TempDir(), "no-such-seed")
	later := VM{Name: "web-0-again", Dir: vms[0].Dir}
	plan := Plan{Name: "shop", Groups: []Group{{VMs: vms}, {VMs: []VM{later}}}}
	state := t.TempDir()
	var sockets []string
	rep, err := Rehearse(ctx, plan, RehearseOptions{StateDir: state, Watch: socketsOf{state: state, dirs: &sockets}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed {
		t.Fatalf("a test failover whose VM did not start passed: %+v", rep)
	}
	want := []string{"1 web-0 start", "1 web-1 start", "1 web-2 start", "0  discard"}
	if got := stepNames(rep); !slices.Equal(got, want) {
		t.Fatalf("the steps %q, not %q", got, want)
	}
	for _, st := range rep.Steps {
		if failed := st.Error != ""; failed != (st.VM == "web-1") {
			t.Fatalf("step %+v", st)
		}
	}
	if !strings.Contains(rep.Steps[1].Error, "cloud-init data") {
		t.Fatalf("web-1's start failed otherwise: %+v", rep.Steps[1])
	}
	wantOverlap(t, rep, 1, "web-0", "web-2")
	if d := rep.Steps[3].Detail; d != "2 VM(s) stopped, their overlays removed" {
		t.Fatalf("the discard step: %q", d)
	}
	if left, _ := filepath.Glob(filepath.Join(rehearsalRoot(state), "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if len(sockets) != 3 {
		t.Fatalf("the run's socket directories: %v", sockets)
	}
	for _, d := range sockets {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("the socket directory %s is left: %v", d, err)
		}
	}
	if procs := qemusUnder(state); len(procs) != 0 {
		t.Fatalf("QEMU processes of the test failover still run: %v", procs)
	}
	if after := tree(t, filepath.Join(s.dir, "dr")); after != before {
		t.Fatalf("the standbys changed:\nbefore %s\nafter  %s", before, after)
	}
}

// socketsOf notes, as each start step ends, the socket directory its VM's
// directory of the run links to (the run directory goes at the end).
type socketsOf struct {
	state string
	dirs  *[]string
}

func (w socketsOf) Step(st Step) {
	if st.Name != "start" {
		return
	}
	links, _ := filepath.Glob(filepath.Join(rehearsalRoot(w.state), "*", "1.*", socketLinkName))
	for _, l := range links {
		if d, err := os.Readlink(l); err == nil && !slices.Contains(*w.dirs, d) {
			*w.dirs = append(*w.dirs, d)
		}
	}
}

func (socketsOf) Probe(ProbeResult) {}

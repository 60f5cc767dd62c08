package qemu_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/qmp"
)

func (l *lab) status() string {
	l.t.Helper()
	var st struct {
		Status string `json:"status"`
	}
	if err := l.admin.Execute(l.ctx, "query-status", nil, &st); err != nil {
		l.t.Fatal(err)
	}
	return st.Status
}

func (l *lab) freezeStatus() string {
	l.t.Helper()
	ga, err := qmp.DialGuestAgent(l.ctx, l.vm.QGAPath)
	if err != nil {
		l.t.Fatal(err)
	}
	defer ga.Close()
	s, err := ga.FreezeStatus(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	return s
}

// A held session (storage snapshot follows) keeps the VM stopped and its
// guest frozen until Release, hands change tracking over at the stop, and
// reads change sets as usual.
func TestHoldKeepsTheVMStillUntilRelease(t *testing.T) {
	l := startLab(t, "")
	req := hypervisor.SnapshotRequest{SessionID: "held", Mode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceRequired, Track: true, Hold: true}
	sess, err := l.conn.Snapshot(l.ctx, l.ref, req)
	if err != nil {
		t.Fatalf("%v\n%s", err, l.vm.Console())
	}
	if st := l.status(); st != "paused" {
		t.Fatalf("held VM is %s, want paused", st)
	}
	if sess.AchievedMode() != hypervisor.Quiesced {
		t.Fatalf("achieved %s", sess.AchievedMode())
	}
	// The guest writes every 15 ms while it runs: two images of a held
	// disk are the same.
	if a, b := l.liveImage("vda"), l.liveImage("vda"); !bytes.Equal(a, b) || len(a) == 0 {
		t.Fatal("the held VM's disk changed while it was held")
	}
	if err := sess.Release(l.ctx); err != nil {
		t.Fatal(err)
	}
	if st := l.status(); st != "running" {
		t.Fatalf("released VM is %s, want running", st)
	}
	if fs := l.freezeStatus(); fs != "thawed" {
		t.Fatalf("released guest is %s, want thawed", fs)
	}
	if err := sess.Release(l.ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	tokens, err := sess.Close(l.ctx, true)
	if err != nil || len(tokens) != 2 {
		t.Fatalf("close: %v %v", tokens, err)
	}
	l.assertClean()

	// The next held session diffs against those tokens.
	req.SessionID, req.Since = "held-2", tokens
	sess, err = l.conn.Snapshot(l.ctx, l.ref, req)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(l.ctx, false)
	for _, d := range sess.Disks() {
		if d.Changes != "incremental" {
			t.Fatalf("disk %s: %s (%s), want incremental", d.Key, d.Changes, d.ChangeWarning)
		}
	}
	r, err := sess.OpenDisk(l.ctx, "vda")
	if err != nil {
		t.Fatal(err)
	}
	ext, ok, err := r.Changed(l.ctx)
	r.Close()
	if err != nil || !ok {
		t.Fatalf("changed: %v %v", ok, err)
	}
	var n int64
	for _, e := range ext {
		n += e.Length
	}
	if n == 0 || n >= 48<<20 {
		t.Fatalf("the writing guest changed %d bytes of vda between two holds, want some and not all", n)
	}
	if _, err := sess.Close(l.ctx, true); err != nil {
		t.Fatal(err)
	}
	l.assertClean()
}

// A coffer killed (SIGKILL) inside the pause window leaves a stopped,
// frozen VM: the next start's cleanup resumes and thaws it.
func TestHoldKilledInsideThePauseWindow(t *testing.T) {
	if sock := os.Getenv("COFFER_TEST_HOLD_QMP"); sock != "" {
		conn, err := qemu.New(qemu.Config{Sockets: []string{sock}, StateDir: os.Getenv("COFFER_TEST_HOLD_STATE")})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		vms, err := conn.Inventory(ctx)
		if err != nil || len(vms) != 1 {
			t.Fatal(err)
		}
		if _, err := conn.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "killed", Mode: hypervisor.Quiesced,
			Quiesce: hypervisor.QuiesceRequired, Track: true, Hold: true}); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	l := startLab(t, "")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldKilledInsideThePauseWindow$")
	cmd.Env = append(os.Environ(), "COFFER_TEST_HOLD_QMP="+l.vm.QMPPath, "COFFER_TEST_HOLD_STATE="+l.state)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child did not die by signal: %v\n%s", err, out)
	}
	if st := l.status(); st != "paused" {
		t.Fatalf("after the kill the VM is %s: the kill was not inside the pause window", st)
	}
	if ents, _ := os.ReadDir(filepath.Join(l.state, "journal")); len(ents) != 1 {
		t.Fatalf("expected the killed session's journal, found %v", ents)
	}
	left, err := l.conn.CleanupLeftovers(l.ctx)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]bool{}
	for _, x := range left {
		actions[x.Kind+" "+x.Action] = true
	}
	if !actions["vm-state resumed"] || !actions["guest-freeze thawed"] {
		t.Fatalf("cleanup reported %+v, want the VM resumed and thawed", left)
	}
	if fs := l.freezeStatus(); fs != "thawed" {
		t.Fatalf("guest is %s after cleanup", fs)
	}
	l.assertClean()
}

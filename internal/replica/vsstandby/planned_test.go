package vsstandby

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/failover"
)

// TestStandbyPlannedFailoverThenFailback: the source, running, writes a block
// after its last backup point; a planned failover of the plan powers it
// off (vcsim's VMs run no VMware Tools), writes that block, and only its
// 64 KiB, onto the standby as a final point, and fails over onto it:
// the standby runs with the source's disk as it stopped. A second
// planned failover is refused. The DR VM writes two blocks; a failback
// is refused while the original runs, and writes nothing then; then it
// writes those two blocks, and only them, onto the original, whose disk
// then equals the DR VM's, powers the original on, leaves the standby
// powered off at its final point, and clears its record. The next
// replication follows the original again.
func TestStandbyPlannedFailoverThenFailback(t *testing.T) {
	b := newLab(t)
	src, cur := b.plannedFailover()
	b.failBack(src, cur)
}

// plannedFailover runs the planned failover of TestStandbyPlannedFailoverThenFailback
// and returns the source and its disk as it shut down.
func (b *lab) plannedFailover() (mo.VirtualMachine, []byte) {
	t := b.t
	ctx := context.Background()
	p, _ := b.backup(map[int64][]byte{0: bytes.Repeat([]byte{0xee}, diskSize/2)})
	if _, err := Run(ctx, b.conn, b.r, p, b.options()); err != nil {
		t.Fatal(err)
	}
	src := b.standby("web-01")
	b.l.Power(src, true)
	srcDisk := b.l.Disk("web-01")
	cur := b.l.ReadFlat(srcDisk)
	copy(cur[1<<20:], []byte("written by the source after its last backup, before the shutdown"))
	b.l.WriteFlat(srcDisk, cur)

	sb := Standby{Client: b.conn.Client(), Name: standbyName, Mark: "dr/web-01", DR: b.conn,
		Source: &Source{Conn: b.conn, VM: b.src.Value}, Keep: 2, StateDir: t.TempDir()}
	plan := failover.Plan{Name: "shop", Groups: []failover.Group{{VMs: []failover.VM{{Name: "web-01", Remote: sb}}}}}
	final := map[string]string{"web-01": p.ID.String()}
	rep, started, err := failover.RunPlan(ctx, plan, final, failover.Options{})
	if err != nil || !rep.Passed || len(started) != 1 {
		t.Fatalf("planned failover: passed %v, %v: %+v", rep.Passed, err, rep.Steps)
	}
	var steps []string
	for _, s := range rep.Steps {
		steps = append(steps, s.Name)
	}
	if got, want := strings.Join(steps, " "), "shutdown final-replication failover ready"; got != want {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if !strings.Contains(rep.Steps[0].Detail, "powered off") || !strings.Contains(rep.Steps[1].Detail, "65536 bytes written") {
		t.Fatalf("shutdown %q, final replication %q", rep.Steps[0].Detail, rep.Steps[1].Detail)
	}
	if st := b.standby("web-01").Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOff {
		t.Fatalf("the source is %s after the planned failover", st)
	}
	if vm := b.standby(standbyName); vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the standby is %s", vm.Runtime.PowerState)
	}
	if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, cur) {
		t.Fatal("the failed-over standby's disk is not the source's as it shut down")
	}
	ps, err := Points(ctx, b.conn.Client(), standbyName)
	if err != nil || len(ps) != 2 || !ps[1].Final || ps[1].Seq != 2 || started[0].Seq != 2 || ps[1].BytesWritten != 64<<10 {
		t.Fatalf("points %+v (%v), started from %d: want a final point 2 of 64 KiB", ps, err, started[0].Seq)
	}
	if rep, _, _ := failover.RunPlan(ctx, plan, final, failover.Options{}); rep.Passed || !strings.Contains(rep.Steps[0].Error, ErrFailedOver.Error()) {
		t.Fatalf("a second planned failover: %+v", rep.Steps)
	}
	return src, cur
}

// failBack lets the DR VM write and fails it back onto src, whose disk
// was cur at the planned failover.
func (b *lab) failBack(src mo.VirtualMachine, cur []byte) {
	t := b.t
	ctx := context.Background()
	srcDisk := b.l.Disk("web-01")
	// The DR site writes two blocks.
	dr := b.l.ReadFlat(b.l.Disk(standbyName))
	copy(dr[2<<20+100:], bytes.Repeat([]byte{0xd1}, 8<<10))
	copy(dr[3<<20:], []byte("written at the DR site"))
	b.l.WriteFlat(b.l.Disk(standbyName), dr)
	o := FailbackOptions{DR: b.conn, Original: Source{Conn: b.conn, VM: b.src.Value}, Name: standbyName, Mark: "dr/web-01", StateDir: t.TempDir()}
	b.l.Power(src, true)
	if _, err := Failback(ctx, o); err == nil || !strings.Contains(err.Error(), "power it off first") {
		t.Fatalf("a failback onto a running original: %v", err)
	}
	if got := b.l.ReadFlat(srcDisk); !bytes.Equal(got, cur) {
		t.Fatal("a refused failback changed the original's disk")
	}
	b.l.Power(src, false)
	snap := object.NewVirtualMachine(b.conn.Client(), src.Self)
	if task, err := snap.CreateSnapshot(ctx, "by hand", "", false, false); err != nil || task.Wait(ctx) != nil {
		t.Fatal(err)
	}
	if _, err := Failback(ctx, o); err == nil || !strings.Contains(err.Error(), "has snapshots") {
		t.Fatalf("a failback onto an original with a snapshot: %v", err)
	}
	if task, err := snap.RemoveSnapshot(ctx, "by hand", false, nil); err != nil || task.Wait(ctx) != nil {
		t.Fatal(err)
	}
	var fbSteps []string
	o.Step = func(name string, _ time.Time, err error, _ string) {
		if err != nil {
			t.Errorf("step %s: %v", name, err)
		}
		fbSteps = append(fbSteps, name)
	}
	res, err := Failback(ctx, o)
	if err != nil || res.BytesWritten != 2*64<<10 || res.Disks != 1 || strings.Join(fbSteps, " ") != "failback switch-back" {
		t.Fatalf("failback: %+v %v, steps %v: want the two blocks the DR site wrote", res, err, fbSteps)
	}
	if got := b.l.ReadFlat(srcDisk); !bytes.Equal(got, dr) {
		t.Fatal("after the failback the original's disk differs from the DR VM's")
	}
	if st := b.standby("web-01").Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the original is %s after the failback", st)
	}
	if st := b.standby(standbyName).Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOff {
		t.Fatalf("the standby is %s after the failback", st)
	}
	if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, cur) {
		t.Fatal("the standby is not back at its final point")
	}
	if _, _, on, err := FailedOver(ctx, b.conn.Client(), standbyName); on || err != nil {
		t.Fatalf("the standby still reads as failed over: %v", err)
	}
	if _, err := Failback(ctx, o); !errors.Is(err, ErrNotFailedOver) {
		t.Fatalf("a second failback: %v", err)
	}
	p2, img := b.backup(map[int64][]byte{3 << 20: []byte("after the failback")})
	if res, err := Run(ctx, b.conn, b.r, p2, b.options()); err != nil || res.Point.Seq != 3 {
		t.Fatalf("the replication after the failback: %+v %v", res, err)
	}
	if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, img) {
		t.Fatal("the standby does not follow the original after the failback")
	}
}

// TestInterruptedPlannedFailoverAndFailbackAreFinished: a planned
// failover stopped once its final point is taken is taken up by the next
// one, which writes nothing more; one killed once it recorded its
// failover is finished onto that point, with no shutdown or copy; a
// failback stopped once its copy is noted is finished by the next one,
// which does not copy again (what the DR VM's disk holds by then never
// reaches the original) and only switches back.
func TestInterruptedPlannedFailoverAndFailbackAreFinished(t *testing.T) {
	b := newLab(t)
	ctx := context.Background()
	p, _ := b.backup(map[int64][]byte{0: []byte("coffer")})
	if _, err := Run(ctx, b.conn, b.r, p, b.options()); err != nil {
		t.Fatal(err)
	}
	srcDisk := b.l.Disk("web-01")
	cur := b.l.ReadFlat(srcDisk)
	copy(cur[1<<20:], "after the backup")
	b.l.WriteFlat(srcDisk, cur)
	o := PlannedOptions{DR: b.conn, Source: Source{Conn: b.conn, VM: b.src.Value}, Name: standbyName, Mark: "dr/web-01",
		BackupPoint: p.ID.String(), Keep: 2, StateDir: t.TempDir()}
	if _, err := PlannedFailover(stopAfter(ctx, &o.Step, "final-replication"), o); err == nil {
		t.Fatal("a planned failover stopped after its final point did not fail")
	}
	var details []string
	stopped := stopAfter(ctx, &o.Step, "final-replication")
	stop := o.Step
	o.Step = func(name string, began time.Time, err error, detail string) {
		details = append(details, name+": "+detail)
		stop(name, began, err, detail)
	}
	if _, err := PlannedFailover(stopped, o); err == nil {
		t.Fatal("the planned failover run again and stopped did not fail")
	}
	if len(details) != 2 || !strings.Contains(details[0], "powered off already") || !strings.Contains(details[1], "point 2: 0 bytes written") {
		t.Fatalf("steps of the planned failover run again: %q", details)
	}
	// Killed once it had recorded its failover: the next one only
	// finishes it, onto the final point.
	sb, err := findStandby(ctx, b.conn.Client(), standbyName)
	if err != nil {
		t.Fatal(err)
	}
	if err := recordFailover(ctx, b.conn.Client(), sb.ref, &failedOver{Seq: 2, At: time.Now(), Planned: true}); err != nil {
		t.Fatal(err)
	}
	details = nil
	pt, err := PlannedFailover(ctx, o)
	if err != nil || pt.Seq != 2 || !pt.Final || len(details) != 0 || b.standby(standbyName).Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the planned failover finished: %+v %v, steps %q", pt, err, details)
	}
	if ps, _ := Points(ctx, b.conn.Client(), standbyName); len(ps) != 2 || !bytes.Equal(b.l.ReadFlat(b.l.Disk(standbyName)), cur) {
		t.Fatalf("points %+v, or the standby's disk is not the source's", ps)
	}

	dr := append([]byte(nil), cur...)
	copy(dr[2<<20:], "written at the DR site")
	b.l.WriteFlat(b.l.Disk(standbyName), dr)
	fo := FailbackOptions{DR: b.conn, Original: Source{Conn: b.conn, VM: b.src.Value}, Name: standbyName, Mark: "dr/web-01", StateDir: t.TempDir()}
	if _, err := Failback(stopAfter(ctx, &fo.Step, "failback"), fo); err == nil {
		t.Fatal("a failback stopped after its copy did not fail")
	}
	if !bytes.Equal(b.l.ReadFlat(srcDisk), dr) {
		t.Fatal("the stopped failback's copy is not on the original")
	}
	b.l.WriteFlat(b.l.Disk(standbyName), bytes.Repeat([]byte{0x66}, diskSize))
	var steps []string
	fo.Step = func(name string, _ time.Time, _ error, _ string) { steps = append(steps, name) }
	res, err := Failback(ctx, fo)
	if err != nil || res.BytesWritten != 0 || strings.Join(steps, " ") != "switch-back" {
		t.Fatalf("the failback run again: %+v %v, steps %v", res, err, steps)
	}
	if !bytes.Equal(b.l.ReadFlat(srcDisk), dr) {
		t.Fatal("the failback run again copied again")
	}
	if st := b.standby("web-01").Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the original is %s", st)
	}
}

// stopAfter is ctx, cancelled once step records the step called name:
// the operation stops there, as if killed.
func stopAfter(ctx context.Context, step *StepFunc, name string) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	*step = func(n string, _ time.Time, _ error, _ string) {
		if n == name {
			cancel()
		}
	}
	return ctx
}

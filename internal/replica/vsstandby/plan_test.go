package vsstandby

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/failover"
)

// TestPlanFailsOverStandbysInOrder: a failover plan of two groups of
// vSphere standbys starts the first group's standby, waits for vCenter
// to report it powered on and for the group's delay, then starts the
// second group's; each runs from the newest point. A second run of the
// plan is refused at its first VM and changes nothing.
func TestPlanFailsOverStandbysInOrder(t *testing.T) {
	b := newLab(t)
	ctx := context.Background()
	p, _ := b.backup(map[int64][]byte{0: []byte("coffer plan")})
	second := b.options()
	second.Name, second.Mark = "db-01-standby", "dr/db-01"
	for _, o := range []Options{b.options(), second} {
		if _, err := Run(ctx, b.conn, b.r, p, o); err != nil {
			t.Fatal(err)
		}
	}
	c := b.conn.Client()
	plan := failover.Plan{Name: "shop", Groups: []failover.Group{
		{VMs: []failover.VM{{Name: "db-01", Remote: Standby{Client: c, Name: "db-01-standby", Mark: "dr/db-01"}}}, Delay: 50 * time.Millisecond},
		{VMs: []failover.VM{{Name: "web-01", Remote: Standby{Client: c, Name: standbyName, Mark: "dr/web-01"}}}},
	}}
	if _, _, on, err := FailedOver(ctx, c, standbyName); on || err != nil {
		t.Fatalf("before the failover the standby reads as failed over: %v %v", on, err)
	}
	rep, started, err := failover.RunPlan(ctx, plan, nil, failover.Options{})
	if err != nil || !rep.Passed || len(started) != 2 {
		t.Fatalf("plan: passed %v, %d started, %v: %+v", rep.Passed, len(started), err, rep.Steps)
	}
	var got []string
	for _, s := range rep.Steps {
		got = append(got, s.VM+":"+s.Name)
	}
	if want := "db-01:failover db-01:ready :delay web-01:failover web-01:ready"; strings.Join(got, " ") != want {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if web, delay := rep.Steps[3], rep.Steps[2]; web.Started.Before(delay.Started.Add(delay.Duration)) || delay.Duration < 50*time.Millisecond {
		t.Fatal("the second group started before the first group's delay was over")
	}
	for _, s := range started {
		if s.Seq != 1 || s.BackupPoint != p.ID.String() {
			t.Fatalf("%s started from point %d (%s), want 1 (%s)", s.VM, s.Seq, s.BackupPoint, p.ID)
		}
	}
	for _, name := range []string{"db-01-standby", standbyName} {
		if st := b.standby(name).Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOn {
			t.Fatalf("%s is %s after the failover", name, st)
		}
		if seq, since, on, err := FailedOver(ctx, c, name); !on || seq != 1 || since.IsZero() || err != nil {
			t.Fatalf("%s's failover record reads %d %v %v %v", name, seq, since, on, err)
		}
	}
	rep, started, err = failover.RunPlan(ctx, plan, nil, failover.Options{})
	if err != nil || rep.Passed || len(started) != 0 || len(rep.Steps) != 1 || !strings.Contains(rep.Steps[0].Error, ErrFailedOver.Error()) {
		t.Fatalf("a second failover: passed %v, %d started, %v: %+v", rep.Passed, len(started), err, rep.Steps)
	}
}

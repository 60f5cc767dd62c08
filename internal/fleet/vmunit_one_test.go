package fleet

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/attempt"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// A backup of one VM handed to a worker builds the request the server's
// engine would (its chain, tags and lock, no policy tag), once its unit
// went through River's JSON; a policy's unit builds the policy's.
func TestOneVMUnitBuildsTheEnginesRequest(t *testing.T) {
	lock := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	b := &engine.VMBackup{Connection: "kvm", Mode: "full", Chain: "backup-vm@main", RetainUntil: lock, Repository: "main",
		Settings: policy.Policy{Connection: "kvm", Snapshot: "quiesced", Quiesce: "required", Tags: map[string]string{"ticket": "42"}, ChangeCheck: -1}}
	if !handedOff(engine.Placement{Worker: "w1", One: b}) || handedOff(engine.Placement{Worker: "w1"}) {
		t.Fatal("a backup of one VM on a worker is handed off, a group's read is not")
	}
	doc, err := json.Marshal(queue.VMUnit{Connection: "kvm", VMID: "u1", VMName: "db-1", Mode: "full", SnapshotMode: "quiesced",
		One: oneOf(engine.Placement{Worker: "w1", One: b})})
	if err != nil {
		t.Fatal(err)
	}
	var u queue.VMUnit
	if err := json.Unmarshal(doc, &u); err != nil {
		t.Fatal(err)
	}
	p := policy.Policy{Connection: u.Connection, Snapshot: u.SnapshotMode, Quiesce: u.One.Quiesce, Tags: u.One.Tags, ChangeCheck: u.One.ChangeCheck}
	spec := attempt.Spec{Connection: "kvm", VM: hypervisor.VMRef{ID: "u1", Name: "db-1"}, Mode: "full", SnapshotMode: "quiesced", JobID: 7, Now: lock}
	got := unitRequest(p, u, spec)
	// As the engine builds it (task.attemptOnce) from the VMBackup.
	want := attempt.Of(b.Settings, spec)
	want.Chain, want.Tags, want.RetainUntil = b.Chain, attempt.Tags(b.Settings, false), b.RetainUntil
	if !reflect.DeepEqual(got, want) || got.Tags["policy"] != "" || !got.RetainUntil.Equal(lock) || p.ChangeCheck != -1 {
		t.Errorf("the worker's request %+v, the engine's %+v", got, want)
	}

	pol := policy.Policy{Name: "nightly", Repository: "main", Tags: map[string]string{"tier": "1"}}
	if got, want := unitRequest(pol, queue.VMUnit{Policy: "nightly"}, spec), attempt.Request(pol, spec); !reflect.DeepEqual(got, want) {
		t.Errorf("a policy's unit: %+v, want %+v", got, want)
	}
}

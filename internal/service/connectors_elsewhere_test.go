package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/planops"
)

// remoteLibvirt has two libvirt connections whose URIs name another host
// (kvm2.invalid resolves nowhere: a test that contacted it would fail
// differently), one policy on each.
const remoteLibvirt = `
connections:
  - {name: theirs, kind: libvirt, options: {uri: "qemu+ssh://root@kvm2.invalid/system"}}
  - {name: ours, kind: libvirt, options: {uri: "qemu+tls://kvm3.invalid/session?pkipath=/etc/pki"}}
policies:
  - {name: a, connection: theirs, schedule: "0 3 * * *"}
  - {name: b, connection: ours, schedule: "0 3 * * *"}
`

// TestRemoteLibvirtURIIsRefusedWithoutAWorker: a libvirt connection whose
// URI names another host cannot be backed up from this process (the
// frozen disks are exported on that host only), so policy check, a
// policy's run and a backup of one VM refuse it before opening anything,
// saying where to run a worker. A connection that a worker reaches is
// not refused: the server never opens it. A local URI passes.
func TestRemoteLibvirtURIIsRefusedWithoutAWorker(t *testing.T) {
	ctx := context.Background()
	s := fleetService(t, t.TempDir(), remoteLibvirt)
	check := func() error {
		_, err := planops.Ops{Service: s}.PolicyCheck(ctx, &api.CheckPoliciesInput{Offline: true})
		return err
	}
	wantTheirs := "connection theirs's URI qemu+ssh://root@kvm2.invalid/system is remote: run a coffer worker on kvm2.invalid " +
		"(coffer worker --reach-connections theirs, see docs/14-workers.md), where the URI is qemu:///system"
	wantOurs := "connection ours's URI qemu+tls://kvm3.invalid/session?pkipath=/etc/pki is remote: run a coffer worker on kvm3.invalid " +
		"(coffer worker --reach-connections ours, see docs/14-workers.md), where the URI is qemu:///session"
	err := check()
	if class, _ := api.ClassOf(err); class != api.Invalid || !strings.Contains(err.Error(), wantTheirs) || !strings.Contains(err.Error(), wantOurs) {
		t.Fatalf("policy check of remote URIs without a worker: %v (%s)", err, class)
	}
	if _, err := s.RunPolicy(ctx, "a"); err == nil || !strings.Contains(err.Error(), wantTheirs) {
		t.Fatalf("run: %v", err)
	}
	_, err = backupops.Ops{Service: s}.BackupVM(ctx, &api.BackupVMInput{Connection: "ours", VM: "web-1"})
	if err == nil || !strings.Contains(err.Error(), wantOurs) {
		t.Fatalf("backup vm: %v", err)
	}

	// A worker reaches "theirs": only "ours" is refused.
	undo := s.SetRemote(&claimingFleet{})
	err = check()
	if err == nil || strings.Contains(err.Error(), "connection theirs") || !strings.Contains(err.Error(), wantOurs) {
		t.Fatalf("policy check with a worker reaching theirs: %v", err)
	}
	undo()

	local := fleetService(t, t.TempDir(), `
connections:
  - {name: here, kind: libvirt, options: {uri: "qemu:///system"}}
  - {name: self, kind: libvirt, options: {uri: "qemu+ssh://localhost/system"}}
  - {name: default, kind: libvirt}
policies:
  - {name: a, connections: [here, self, default], schedule: "0 3 * * *"}
`)
	if _, err := (planops.Ops{Service: local}).PolicyCheck(ctx, &api.CheckPoliciesInput{Offline: true}); err != nil {
		t.Fatalf("policy check of local URIs: %v", err)
	}
}

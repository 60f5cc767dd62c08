package restorewizard

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

func TestTargets(t *testing.T) {
	conns := []api.ConfigObject{
		{Name: "vc", Spec: map[string]any{"kind": "vsphere"}},
		{Name: "kvm", Spec: map[string]any{"kind": "libvirt"}},
		{Name: "lab", Spec: map[string]any{"kind": "fake"}},
		{Name: "old", Spec: map[string]any{"kind": "libvirt"}, Overridden: true},
	}
	// A point whose record does not say its platform: its connection's.
	got, platform := Targets(conns, api.BackupPoint{Connection: "vc"})
	if platform != "vsphere" || len(got) != 2 || got[0] != (Target{Name: "vc", Kind: "vsphere"}) ||
		got[1] != (Target{Name: "kvm", Kind: "libvirt", Other: true}) {
		t.Fatalf("a vSphere point: %s %+v", platform, got)
	}
	got, platform = Targets(conns, api.BackupPoint{SourceKind: "qemu"})
	if platform != "qemu" || len(got) != 2 || !got[0].Other || !got[1].Other {
		t.Fatalf("a QEMU point: %s %+v", platform, got)
	}
}

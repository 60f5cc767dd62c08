package restorewizard

import (
	"strings"
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

// TestInstantLimits: the console starts instant recoveries of QEMU and
// vSphere points (a vSphere one's form asks where its VM runs), not of
// disk images, and sends a libvirt domain's to the command line.
func TestInstantLimits(t *testing.T) {
	for kind, offered := range map[string]bool{"qemu": true, "vsphere": true, "disk": false, "libvirt": false} {
		why := Limits(api.BackupPoint{SourceKind: kind, Connection: "c"})["instant"]
		if (why == "") != offered {
			t.Errorf("%s point: instant recovery offered %v (%q), want %v", kind, why == "", why, offered)
		}
	}
	if why := Limits(api.BackupPoint{SourceKind: "libvirt"})["instant"]; !strings.Contains(why, "coffer instant start") {
		t.Errorf("a libvirt point's reason: %q", why)
	}
}

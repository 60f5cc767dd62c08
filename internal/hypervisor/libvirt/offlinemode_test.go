package libvirt

import (
	"errors"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// TestOfflineMode: a shut-off domain's disks are at rest. After the guest
// shut itself down the mode asked for holds; after a destroy or a crash
// the point is crash-consistent with a warning, and a required quiesce
// fails.
func TestOfflineMode(t *testing.T) {
	for _, c := range []struct {
		reason  golibvirt.DomainShutoffReason
		mode    hypervisor.SnapshotMode
		quiesce hypervisor.QuiescePolicy
		want    hypervisor.SnapshotMode
		err     error
	}{
		{golibvirt.DomainShutoffShutdown, hypervisor.Quiesced, hypervisor.QuiesceRequired, hypervisor.Quiesced, nil},
		{golibvirt.DomainShutoffShutdown, hypervisor.Suspend, "", hypervisor.Suspend, nil},
		{golibvirt.DomainShutoffShutdown, "", "", hypervisor.CrashConsistent, nil},
		{golibvirt.DomainShutoffDestroyed, hypervisor.Quiesced, hypervisor.QuiesceFallback, hypervisor.CrashConsistent, nil},
		{golibvirt.DomainShutoffCrashed, hypervisor.Suspend, "", hypervisor.CrashConsistent, nil},
		{golibvirt.DomainShutoffDestroyed, hypervisor.Quiesced, hypervisor.QuiesceRequired, "", hypervisor.ErrQuiesceFailed},
	} {
		s := &session{req: hypervisor.SnapshotRequest{Mode: c.mode, Quiesce: c.quiesce}, shutoff: c.reason}
		err := s.offlineMode()
		if !errors.Is(err, c.err) || err == nil && (s.achieved != c.want || len(s.warnings) != 1) {
			t.Errorf("shut off for reason %d, %s/%s: achieved %q, warnings %q, err %v; want %q, %v",
				c.reason, c.mode, c.quiesce, s.achieved, s.warnings, err, c.want, c.err)
		}
	}
}

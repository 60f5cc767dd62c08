package engine

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

func TestSetWorkersRefusesBadWorkers(t *testing.T) {
	d := newDispatcher(4)
	for _, ws := range [][]Worker{{{Slots: 1}}, {{Name: "a", Slots: 1}, {Name: "a", Slots: 2}}, {{Name: "a"}}} {
		if err := d.setWorkers(ws); err == nil {
			t.Errorf("%+v accepted", ws)
		}
	}
}

func TestUnreachedNamesWhatIsMissing(t *testing.T) {
	cfg := &policy.Config{Connections: []policy.Connection{{Name: "kvm", Kind: "libvirt"}, {Name: "vc", Kind: "vsphere"}}}
	vm := hypervisor.VM{VMRef: hypervisor.VMRef{Name: "db1"}, Host: "kvm7"}
	ws := []Worker{
		{Name: "a", Slots: 1, Reach: Reach{Connections: []string{"kvm", "vc"}, Hosts: []string{"kvm/kvm1"}}},
		{Name: "b", Slots: 1, Reach: Reach{Connections: []string{"kvm"}, Hosts: []string{"kvm/kvm7"}, Repositories: []string{"local"}}},
	}
	p := policy.Policy{Name: "p", Repository: "s3"}
	for _, c := range []struct {
		conn string
		ws   []Worker
		want string
	}{
		{"kvm", ws, "no worker reaches repository s3"},
		{"kvm", ws[:1], "no worker reaches host kvm7"},
		{"vc", ws, ""}, // vSphere: any worker with the connection, whatever its hosts
		{"vc", ws[1:], "no worker reaches connection vc"},
		{"vc", nil, "no live worker"},
	} {
		if got := Unreached(c.ws, RouteOf(cfg, p, c.conn, vm)); got != c.want {
			t.Errorf("%s with %d workers: %q, want %q", c.conn, len(c.ws), got, c.want)
		}
	}
}

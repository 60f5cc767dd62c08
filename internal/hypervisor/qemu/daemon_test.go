package qemu

import (
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

func TestDaemonNBDServerFromCmdline(t *testing.T) {
	for _, c := range []struct {
		args          []string
		network, addr string
		found         bool
		unsupported   bool
	}{
		{args: []string{"qemu-storage-daemon", "--blockdev", "driver=file,node-name=f,filename=/a", "--nbd-server", "addr.type=unix,addr.path=/run/qsd/nbd,,1.sock"},
			network: "unix", addr: "/run/qsd/nbd,1.sock", found: true},
		{args: []string{"qemu-storage-daemon", "--nbd-server=addr.type=inet,addr.host=::1,addr.port=10809,max-connections=4"},
			network: "tcp", addr: "[::1]:10809", found: true},
		{args: []string{"qemu-storage-daemon", "--nbd-server", `{"addr":{"type":"unix","path":"/run/n.sock"}}`},
			network: "unix", addr: "/run/n.sock", found: true},
		{args: []string{"qemu-storage-daemon", "--nbd-server", "addr.type=unix,addr.path=/n,tls-creds=tls0"}, found: true, unsupported: true},
		{args: []string{"qemu-storage-daemon", "--nbd-server", "addr.type=fd,addr.str=3"}, found: true, unsupported: true},
		{args: []string{"qemu-storage-daemon", "--export", "type=vhost-user-blk,id=v,node-name=d,addr.type=unix,addr.path=/v.sock"}},
		{args: nil},
	} {
		network, addr, found, err := daemonNBDServer(c.args)
		if c.unsupported {
			if !errors.Is(err, hypervisor.ErrUnsupported) || !found {
				t.Errorf("%v: want unsupported, got %v %v", c.args, found, err)
			}
			continue
		}
		if err != nil || network != c.network || addr != c.addr || found != c.found {
			t.Errorf("%v: got %q %q %v %v", c.args, network, addr, found, err)
		}
	}
}

func TestDaemonName(t *testing.T) {
	for sock, want := range map[string]string{
		"/run/coffer/db-3.qmp":   "db-3",
		"/run/qsd/db-4/qmp.sock": "db-4",
		"relative.sock":          "relative",
	} {
		if got := daemonName(sock); got != want {
			t.Errorf("daemonName(%q) = %q, want %q", sock, got, want)
		}
	}
}

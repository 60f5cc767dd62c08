package all

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
	"github.com/coffer-backup/coffer/internal/policy"
)

func libvirtConnection(t *testing.T, name, uri string) Config {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("uri: "+uri+"\n"), &n); err != nil {
		t.Fatal(err)
	}
	return Config{Connection: policy.Connection{Name: name, Kind: "libvirt", Options: *n.Content[0]}, StateDir: t.TempDir()}
}

// TestRemoteLibvirtURIs: a libvirt URI naming another host is refused
// with where to run a worker and the URI it uses there; a local one (no
// host, loopback, this machine's name) is not. The connector opened on a
// remote URI refuses a snapshot before it contacts libvirt.
func TestRemoteLibvirtURIs(t *testing.T) {
	self, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	kind, _ := Lookup("libvirt")
	for uri, want := range map[string]string{
		"qemu+ssh://root@kvm2.invalid/system": "connection kvm2's URI qemu+ssh://root@kvm2.invalid/system is remote: run a coffer worker on kvm2.invalid " +
			"(coffer worker --reach-connections kvm2, see docs/14-workers.md), where the URI is qemu:///system",
		"qemu+tls://kvm2.invalid:16514/session": "run a coffer worker on kvm2.invalid (coffer worker --reach-connections kvm2, see docs/14-workers.md), where the URI is qemu:///session",
		"qemu://10.0.0.7/system":                "run a coffer worker on 10.0.0.7 ",
		"qemu:///system":                        "",
		"qemu+unix:///system":                   "",
		"qemu:///session?socket=/run/x.sock":    "",
		"qemu+ssh://localhost/system":           "",
		"qemu+tcp://127.0.0.1/system":           "",
		"qemu+ssh://root@" + self + "/system":   "",
	} {
		cfg := libvirtConnection(t, "kvm2", uri)
		err := kind.Elsewhere(cfg)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", uri, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v; want %q", uri, err, want)
		}
	}

	c, err := kind.Open(context.Background(), libvirtConnection(t, "kvm2", "qemu+ssh://root@kvm2.invalid/system"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Snapshot(context.Background(), hypervisor.VMRef{Name: "web-1"}, hypervisor.SnapshotRequest{Mode: hypervisor.CrashConsistent})
	if !errors.Is(err, hypervisor.ErrUnsupported) || !strings.Contains(err.Error(), "run a coffer worker on kvm2.invalid") {
		t.Fatalf("snapshot on a remote URI: %v", err)
	}
}

// TestLibvirtHostNames: a short and a full name of one machine are the
// same host, two machines sharing a first label are not.
func TestLibvirtHostNames(t *testing.T) {
	for _, tc := range []struct{ uri, self, want string }{
		{"qemu+ssh://kvm2/system", "kvm2.example.com", ""},
		{"qemu+ssh://kvm2.example.com/system", "kvm2", ""},
		{"qemu+ssh://KVM2.example.com/system", "kvm2.example.com", ""},
		{"qemu+ssh://kvm2.dc1/system", "kvm2.dc2", "kvm2.dc1"},
		{"qemu+ssh://[::1]/system", "kvm1", ""},
		{"qemu+ssh://kvm2/system", "", "kvm2"},
	} {
		u, err := url.Parse(tc.uri)
		if err != nil {
			t.Fatal(err)
		}
		if got := libvirt.RemoteHost(u, tc.self); got != tc.want {
			t.Errorf("RemoteHost(%s, %s) = %q, want %q", tc.uri, tc.self, got, tc.want)
		}
	}
}

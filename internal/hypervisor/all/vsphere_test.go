package all

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/policy"
)

// TestVSphereHostAndGuestOptions: the options of reading from the hosts,
// hot-add and guest hooks decode, and contradictory or half-given ones
// are refused with what to change.
func TestVSphereHostAndGuestOptions(t *testing.T) {
	base := "url: https://vc/sdk\nuser: u\npassword-file: /pw\n"
	for _, tc := range []struct{ extra, err string }{
		{"read-from: host\nhost-user: root\nhost-password-file: /esx\nhost-addresses: {esx-1: 10.0.0.1}\nhost-thumbprints: {esx-1: 'AB:CD'}\n" +
			"data-mover-vm: mover\nguest-user: g\nguest-password-file: /g\n", ""},
		{"read-from: host-only\n", ""},
		{"read-from: vcenter\n", ""},
		{"read-from: esx\n", "read-from \"esx\""},
		{"host-user: root\n", "host-user and host-password-file go together"},
		{"guest-password-file: /g\n", "guest-user and guest-password-file go together"},
		{"read-from: vcenter\nhost-addresses: {esx-1: 10.0.0.1}\n", "read-from: vcenter reads nothing from the hosts"},
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(base+tc.extra), &n); err != nil {
			t.Fatal(err)
		}
		o, err := vsphereOptions(Config{Connection: policy.Connection{Name: "vc", Kind: "vsphere", Options: *n.Content[0]}})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.extra, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v; want %q", tc.extra, err, tc.err)
		}
		if tc.err == "" && strings.Contains(tc.extra, "data-mover-vm") && (o.DataMoverVM != "mover" || o.HostAddresses["esx-1"] != "10.0.0.1" || o.GuestUser != "g") {
			t.Errorf("decoded %+v", o)
		}
	}
}

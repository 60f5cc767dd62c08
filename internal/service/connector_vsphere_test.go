package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service/policyfind"
)

// TestGuestHooksOnVSphereNeedAGuestAccount: policy check refuses guest
// hooks on a vSphere connection without guest-user, and accepts them with
// it (host hooks need nothing).
func TestGuestHooksOnVSphereNeedAGuestAccount(t *testing.T) {
	for _, tc := range []struct {
		options, where string
		refused        bool
	}{
		{"{url: https://vc/sdk, user: u, password-file: /pw}", "guest", true},
		{"{url: https://vc/sdk, user: u, password-file: /pw, guest-user: g, guest-password-file: /g}", "guest", false},
		{"{url: https://vc/sdk, user: u, password-file: /pw}", "host", false},
	} {
		f, err := config.Parse(fmt.Appendf(nil, "connections:\n  - name: vc\n    kind: vsphere\n    options: %s\npolicies:\n  - name: db\n    connection: vc\n"+
			"    hooks:\n      - {name: flush, where: %s, pre: [/usr/bin/flush]}\n", tc.options, tc.where))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := policy.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		var refused bool
		for _, fd := range policyfind.PolicyFindings(cfg, cfg.Policies[0]) {
			if fd.Level == policyfind.LevelError && strings.Contains(fd.Message, "guest-user and guest-password-file") {
				refused = true
			}
		}
		if refused != tc.refused {
			t.Errorf("%s hook with options %s: refused %v, want %v", tc.where, tc.options, refused, tc.refused)
		}
	}
}

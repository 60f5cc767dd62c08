package vsphere

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectVerifiesTLS: without a pin or a CA the simulator's
// self-signed certificate is refused; a wrong pin or password is refused;
// the right pin (SHA-256 or SHA-1, any case or separator) logs in.
func TestConnectVerifiesTLS(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	ctx := context.Background()
	base := func() Config {
		return Config{URL: s.url.String(), User: simUser, Password: simPass, StateDir: filepath.Join(t.TempDir(), "st")}
	}
	cases := []struct {
		name string
		mod  func(*Config)
		err  string
	}{
		{"no pin", func(c *Config) {}, "certificate"},
		{"wrong pin", func(c *Config) { c.Thumbprint = strings.Repeat("00:", 31) + "00" }, "thumbprint"},
		{"wrong password", func(c *Config) { c.Thumbprint, c.Password = s.thumb, "nope" }, "login"},
		{"pin", func(c *Config) { c.Thumbprint = s.thumb }, ""},
		{"pin lower-case without colons", func(c *Config) {
			c.Thumbprint = strings.ToLower(strings.ReplaceAll(s.thumb, ":", ""))
		}, ""},
		{"insecure", func(c *Config) { c.Insecure = true }, ""},
	}
	for _, tc := range cases {
		cfg := base()
		tc.mod(&cfg)
		c, err := New(ctx, cfg)
		if tc.err == "" {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if vms, err := c.Inventory(ctx); err != nil || len(vms) != 1 {
				t.Fatalf("%s: inventory %v %v", tc.name, vms, err)
			}
			c.Close(ctx)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Fatalf("%s: got %v, want an error about %s", tc.name, err, tc.err)
		}
	}
}

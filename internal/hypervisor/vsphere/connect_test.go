package vsphere

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"

	"github.com/coffer-backup/coffer/internal/hypervisor"
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

// TestSnapshotByNameOrUUID: a VM given by name only (a command line) or by
// its instance UUID (a recorded configuration) is found.
func TestSnapshotByNameOrUUID(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 2})
	c := s.connect(t, nil)
	ctx := context.Background()
	uuid := s.vm(s.vms[1]).Config.InstanceUuid
	for _, ref := range []hypervisor.VMRef{{Name: "vm-0000"}, {ID: uuid, Name: "by-uuid"}} {
		sess, err := c.Snapshot(ctx, ref, hypervisor.SnapshotRequest{SessionID: "n" + ref.Name, Mode: hypervisor.CrashConsistent})
		if err != nil {
			t.Fatalf("%+v: %v", ref, err)
		}
		if _, err := sess.Close(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Snapshot(ctx, hypervisor.VMRef{Name: "nope"}, hypervisor.SnapshotRequest{SessionID: "x"}); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Fatalf("unknown VM: %v", err)
	}
}

// TestCustomAttributesAsTags: vSphere custom attributes are the inventory's
// tags, so policies can select VMs by them.
func TestCustomAttributesAsTags(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 2})
	c := s.connect(t, nil)
	ctx := context.Background()
	m, err := object.GetCustomFieldsManager(s.client)
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Add(ctx, "backup-tier", "VirtualMachine", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Set(ctx, s.vms[1], f.Key, "gold"); err != nil {
		t.Fatal(err)
	}
	vms, err := c.Inventory(ctx)
	if err != nil || len(vms) != 2 {
		t.Fatalf("%v %v", vms, err)
	}
	if vms[0].Tags["backup-tier"] != "" || vms[1].Tags["backup-tier"] != "gold" {
		t.Fatalf("tags: %v, %v", vms[0].Tags, vms[1].Tags)
	}
}

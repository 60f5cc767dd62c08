package cli

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
)

// TestVSphereConnection lists the VMs of an in-process vCenter simulator
// through a `kind: vsphere` connection: TLS verified by a pinned
// thumbprint, the password read from a file; a wrong thumbprint is refused.
func TestVSphereConnection(t *testing.T) {
	m := simulator.VPX()
	m.Host, m.ClusterHost, m.Machine, m.Autostart = 0, 2, 3, false
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword("coffer", "s3cret")}
	srv := m.Service.NewServer()
	t.Cleanup(srv.Close)

	e := newEnv(t)
	pw := filepath.Join(e.dir, "vc.password")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	sdk := url.URL{Scheme: srv.URL.Scheme, Host: srv.URL.Host, Path: srv.URL.Path}
	conf := func(thumb string) string {
		return fmt.Sprintf("connections:\n  - name: vc\n    kind: vsphere\n    options: {url: %q, user: coffer, password-file: %q, thumbprint: %q}\n",
			sdk.String(), pw, thumb)
	}
	e.config(conf(soap.ThumbprintSHA256(srv.Certificate())))
	var vms []vmDoc
	if err := json.Unmarshal([]byte(e.must("vms", "--json")), &vms); err != nil {
		t.Fatal(err)
	}
	if len(vms) != 3 {
		t.Fatalf("%d VMs: %+v", len(vms), vms)
	}
	for _, vm := range vms {
		if vm.Connection != "vc" || vm.Host == "" || len(vm.Datastores) != 1 || vm.Bytes == 0 {
			t.Fatalf("vm %+v", vm)
		}
	}
	e.config(conf(strings.Repeat("AB:", 31) + "AB"))
	if out := e.expect(ExitFailure, "vms"); !strings.Contains(out, "thumbprint") {
		t.Fatalf("wrong thumbprint: %s", out)
	}
}

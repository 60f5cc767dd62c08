package instant

import (
	"context"
	"strings"
	"testing"
)

// A libvirt domain's session cannot be served again (its QEMU never
// reconnects): Reserve says so before it opens anything.
func TestReserveRefusesDomainSession(t *testing.T) {
	s := &Session{ID: "3fa2c1d0", State: StateRunning, Connection: "kvm2", Domain: "web-1-instant"}
	_, err := Reserve(context.Background(), nil, s, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot read from a server started again") {
		t.Fatalf("Reserve of a domain session: %v", err)
	}
	if !s.IsDomain() || (&Session{}).IsDomain() {
		t.Fatal("IsDomain")
	}
}

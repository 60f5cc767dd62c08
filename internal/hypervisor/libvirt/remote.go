package libvirt

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// RemoteHost is the host a libvirt URI names when that host is not this
// machine (self, its host name), "" when the URI is local: no host
// (qemu:///system, qemu+unix:///system), a loopback name or address, or
// self, as a worker on kvm2 reaching qemu+ssh://kvm2/system is.
//
// A remote URI lists domains, but coffer cannot protect them: libvirt's
// backup API exports the frozen disks on a unix socket on the
// hypervisor's host, and a restore or an instant recovery writes or serves
// the disks there too.
func RemoteHost(u *url.URL, self string) string {
	h := u.Hostname()
	if h == "" || strings.EqualFold(h, "localhost") || sameHost(h, self) {
		return ""
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return ""
	}
	return h
}

// sameHost: a and b name one machine, in full or by its short name
// (kvm2 and kvm2.example.com).
func sameHost(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	short := func(s string) string { first, _, _ := strings.Cut(s, "."); return first }
	return strings.EqualFold(a, b) || strings.EqualFold(a, short(b)) || strings.EqualFold(short(a), b)
}

// LocalURI is u as a process on its host writes it, with no transport,
// host or parameters: qemu+ssh://root@kvm2/system is qemu:///system.
func LocalURI(u *url.URL) string {
	driver, _, _ := strings.Cut(u.Scheme, "+")
	return driver + "://" + u.Path
}

// elsewhere refuses what reads or writes the domains' disks when the
// connection's hypervisor is on another host (Config.Elsewhere).
func (c *Connector) elsewhere() error {
	if c.cfg.Elsewhere == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", hypervisor.ErrUnsupported, c.cfg.Elsewhere)
}

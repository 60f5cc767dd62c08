// Package throttlekey names what a sign-in throttle counts (internal/auth):
// a typed user name, a remote address.
package throttlekey

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
)

// User is the throttle key of a typed user name. It is hashed:
// the name field sometimes receives a password, and the catalog must not
// keep it. Names that do not exist are throttled too, so a lock says
// nothing about whether the user exists.
func User(name string) string {
	h := sha256.Sum256([]byte(name))
	return "user:" + hex.EncodeToString(h[:16])
}

// Address is the throttle key of a remote address ("ip" or
// "ip:port"): an IPv4 address, or the /64 of an IPv6 address (one
// attacker usually holds a whole /64). An address that does not parse is
// used as it is, cut to a bounded length.
func Address(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	a, err := netip.ParseAddr(host)
	if err != nil {
		if len(host) > 64 {
			host = host[:64]
		}
		return "addr:" + host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		return "addr:" + netip.PrefixFrom(a, 64).Masked().String()
	}
	return "addr:" + a.String()
}

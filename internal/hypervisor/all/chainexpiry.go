package all

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/policy"
)

// chainExpiryOption reads a connection's `unused-chain-expiry`: how long a
// backup chain (a policy and its repository) may go without a backup
// before the hypervisor-side change tracking it keeps on every disk is
// removed. "" is the default (hypervisor.DefaultChainExpiry), "never"
// keeps tracking forever; the connectors take 0 and a negative value for
// those.
func chainExpiryOption(conn, v string) (time.Duration, error) {
	switch v {
	case "":
		return 0, nil
	case "never":
		return -1, nil
	}
	d, err := policy.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("connection %s: options.unused-chain-expiry %q is not a duration (like 35d or 72h) or \"never\"", conn, v)
	}
	return d, nil
}

package hypervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// A backup chain is one policy writing to one repository
// (SnapshotRequest.Chain). Each chain of a disk keeps its own change
// tracking (a QEMU dirty bitmap, a libvirt checkpoint), so that a local
// chain every 15 minutes and an offsite chain every night both read only
// what changed since their own last point. Tracking costs the guest a
// little on every write, so a chain that stops backing up (its policy was
// deleted or moved) must not keep it forever: ChainExpiry removes it.

// DefaultChainExpiry is how long a chain may go without a backup before its
// change tracking is removed: longer than any sensible schedule (a monthly
// chain included), short enough that a forgotten chain goes away.
const DefaultChainExpiry = 35 * 24 * time.Hour

// ChainLabel is the part of a tracking object's name that says which chain
// it belongs to: the chain's name made safe and shortened, plus a hash of
// the whole name, so that an administrator reading `virsh checkpoint-list`
// or `query-block` sees which policy and repository an object serves, and
// two chains never share one. It contains no '-'. "" is the chain
// "default".
func ChainLabel(chain string) string {
	if chain == "" {
		chain = "default"
	}
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, chain)
	if len(safe) > 32 {
		safe = safe[:32]
	}
	sum := sha256.Sum256([]byte(chain))
	return safe + "." + hex.EncodeToString(sum[:3])
}

// ChainMark is one change-tracking object of a chain on one disk or VM.
type ChainMark struct {
	Name    string
	Label   string // ChainLabel of its chain
	Created time.Time
}

// ChainExpiry decides which chains have gone unused for too long.
type ChainExpiry struct {
	Now time.Time
	// After is how long a chain may go without a new mark; zero expires
	// nothing (cleanup after a crash decides nothing about chains).
	After time.Duration
}

// ExpiryOf is the expiry at this instant of a connector configured with
// after (0: DefaultChainExpiry, negative: never) and clock now (nil:
// time.Now).
func ExpiryOf(after time.Duration, now func() time.Time) ChainExpiry {
	if now == nil {
		now = time.Now
	}
	switch {
	case after == 0:
		after = DefaultChainExpiry
	case after < 0:
		after = 0
	}
	return ChainExpiry{Now: now(), After: after}
}

// Expired returns the names of the marks of every chain other than own
// whose newest mark is older than e.After: a chain's newest mark is its
// last backup, so that is how long it has gone unused.
func (e ChainExpiry) Expired(marks []ChainMark, own string) []string {
	if e.After <= 0 {
		return nil
	}
	newest := map[string]time.Time{}
	for _, m := range marks {
		if m.Created.After(newest[m.Label]) {
			newest[m.Label] = m.Created
		}
	}
	var out []string
	for _, m := range marks {
		if m.Label != own && e.Now.Sub(newest[m.Label]) > e.After {
			out = append(out, m.Name)
		}
	}
	return out
}

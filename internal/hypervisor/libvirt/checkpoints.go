package libvirt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// Checkpoint names: coffer-<chain>-<full|inc>-<unique>. The chain part is
// the chain's name made safe and shortened, plus a hash of the whole name,
// so an administrator reading `virsh checkpoint-list` sees which policy and
// repository a checkpoint belongs to, and two chains never share one.
const checkpointPrefix = "coffer-"

// chainLabel is the chain part of a checkpoint name.
func chainLabel(chain string) string {
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

// chainPrefix is what every checkpoint of a chain starts with.
func chainPrefix(chain string) string { return checkpointPrefix + chainLabel(chain) + "-" }

// isFull reports whether a checkpoint name is a chain's full anchor (the
// base of its differentials).
func isFull(name, chain string) bool { return strings.HasPrefix(name, chainPrefix(chain)+"full-") }

// token is a disk's change token: the checkpoint and the disk's size then.
func token(checkpoint string, size int64) string { return fmt.Sprintf("%s@%d", checkpoint, size) }

func parseToken(tok string) (name string, size int64, ok bool) {
	name, s, found := strings.Cut(tok, "@")
	if !found || !strings.HasPrefix(name, checkpointPrefix) {
		return "", 0, false
	}
	size, err := strconv.ParseInt(s, 10, 64)
	return name, size, err == nil
}

// checkpointXML is the part of a checkpoint's XML coffer reads and writes.
type checkpointXML struct {
	XMLName     xml.Name `xml:"domaincheckpoint"`
	Name        string   `xml:"name"`
	Description string   `xml:"description,omitempty"`
	Disks       []struct {
		Name       string `xml:"name,attr"`
		Checkpoint string `xml:"checkpoint,attr"`
	} `xml:"disks>disk"`
}

// checkpoints lists a domain's checkpoints by name, with the disks each one
// tracks.
func (c *Connector) checkpoints(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain) (map[string]map[string]bool, error) {
	list, err := call(ctx, c.cfg.CallTimeout, "list checkpoints of "+dom.Name, func() ([]golibvirt.DomainCheckpoint, error) {
		l, _, err := lv.DomainListAllCheckpoints(dom, 1, 0)
		return l, err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{}
	for _, cp := range list {
		disks := map[string]bool{}
		out[cp.Name] = disks
		if !strings.HasPrefix(cp.Name, checkpointPrefix) {
			continue // not ours: only its name matters (it is never touched)
		}
		doc, err := call(ctx, c.cfg.CallTimeout, "describe checkpoint "+cp.Name, func() (string, error) {
			return lv.DomainCheckpointGetXMLDesc(cp, 0)
		})
		if err != nil {
			if isLibvirtError(err, golibvirt.ErrNoDomainCheckpoint) {
				delete(out, cp.Name)
				continue
			}
			return nil, err
		}
		var x checkpointXML
		if err := xml.Unmarshal([]byte(doc), &x); err != nil {
			return nil, fmt.Errorf("libvirt: checkpoint %s: %w", cp.Name, err)
		}
		for _, d := range x.Disks {
			if d.Checkpoint == "bitmap" {
				disks[d.Name] = true
			}
		}
	}
	return out, nil
}

// deleteCheckpoint deletes one checkpoint by name; one already gone is not
// an error. libvirt merges the deleted checkpoint's bitmap into its
// parent's, so every older checkpoint (another chain's, or a foreign one)
// still describes all changes since its own instant.
func (c *Connector) deleteCheckpoint(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, name string) error {
	if !strings.HasPrefix(name, checkpointPrefix) {
		// A guard, not a decision: callers only pass coffer's names.
		return fmt.Errorf("libvirt: refusing to delete checkpoint %q, which coffer did not create", name)
	}
	err := do(ctx, c.cfg.CallTimeout, "delete checkpoint "+name, func() error {
		cp, err := lv.DomainCheckpointLookupByName(dom, name, 0)
		if err != nil {
			return err
		}
		return lv.DomainCheckpointDelete(cp, 0)
	})
	if isLibvirtError(err, golibvirt.ErrNoDomainCheckpoint) {
		return nil
	}
	return err
}

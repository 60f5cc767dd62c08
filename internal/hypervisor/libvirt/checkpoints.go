package libvirt

import (
	"context"
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Checkpoint names: coffer-<chain label>-<full|inc>-<unique>
// (hypervisor.ChainLabel), so two chains never share one and an
// administrator reading `virsh checkpoint-list` sees whose each one is.
const checkpointPrefix = "coffer-"

// chainPrefix is what every checkpoint of a chain starts with.
func chainPrefix(chain string) string { return checkpointPrefix + hypervisor.ChainLabel(chain) + "-" }

// chainMarks are coffer's checkpoints as marks of their chains, for
// expiry. A name that does not parse is left out, and so never expires.
func chainMarks(cps map[string]checkpoint) []hypervisor.ChainMark {
	var out []hypervisor.ChainMark
	for name, cp := range cps {
		rest, ours := strings.CutPrefix(name, checkpointPrefix)
		label, kind, _ := strings.Cut(rest, "-")
		if ours && (strings.HasPrefix(kind, "full-") || strings.HasPrefix(kind, "inc-")) {
			out = append(out, hypervisor.ChainMark{Name: name, Label: label, Created: cp.created})
		}
	}
	return out
}

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
	// CreationTime is set by libvirt (seconds since the epoch); it is how
	// long a chain has gone unused.
	CreationTime int64 `xml:"creationTime,omitempty"`
	Disks        []struct {
		Name       string `xml:"name,attr"`
		Checkpoint string `xml:"checkpoint,attr"`
	} `xml:"disks>disk"`
}

// checkpoint is what coffer needs to know of one of a domain's checkpoints.
type checkpoint struct {
	disks   map[string]bool // the disks it tracks
	created time.Time
}

// checkpoints lists a domain's checkpoints by name. Only coffer's own are
// described; a foreign one is listed by name alone.
func (c *Connector) checkpoints(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain) (map[string]checkpoint, error) {
	list, err := call(ctx, c.cfg.CallTimeout, "list checkpoints of "+dom.Name, func() ([]golibvirt.DomainCheckpoint, error) {
		l, _, err := lv.DomainListAllCheckpoints(dom, 1, 0)
		return l, err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]checkpoint{}
	for _, cp := range list {
		disks := map[string]bool{}
		out[cp.Name] = checkpoint{disks: disks}
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
		out[cp.Name] = checkpoint{disks: disks, created: time.Unix(x.CreationTime, 0)}
	}
	return out, nil
}

// deleteCheckpoint deletes one checkpoint by name; one already gone is not
// an error. libvirt merges the deleted checkpoint's bitmap into its
// parent's, so every older checkpoint (another chain's, or a foreign one)
// still describes all changes since its own instant.
func (c *Connector) deleteCheckpoint(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, name string) error {
	return c.removeCheckpoint(ctx, lv, dom, name, 0)
}

// forgetCheckpoint deletes only libvirt's record of a checkpoint: for a
// domain whose disk files were replaced, which took the checkpoint's
// bitmaps with them (and libvirt deletes a shut-off domain's checkpoints
// no other way).
func (c *Connector) forgetCheckpoint(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, name string) error {
	return c.removeCheckpoint(ctx, lv, dom, name, golibvirt.DomainCheckpointDeleteMetadataOnly)
}

func (c *Connector) removeCheckpoint(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, name string, flags golibvirt.DomainCheckpointDeleteFlags) error {
	if !strings.HasPrefix(name, checkpointPrefix) {
		// A guard, not a decision: callers only pass coffer's names.
		return fmt.Errorf("libvirt: refusing to delete checkpoint %q, which coffer did not create", name)
	}
	err := do(ctx, c.cfg.CallTimeout, "delete checkpoint "+name, func() error {
		cp, err := lv.DomainCheckpointLookupByName(dom, name, 0)
		if err != nil {
			return err
		}
		return lv.DomainCheckpointDelete(cp, flags)
	})
	if isLibvirtError(err, golibvirt.ErrNoDomainCheckpoint) {
		return nil
	}
	if flags == 0 && isLibvirtError(err, golibvirt.ErrOperationUnsupported) {
		// libvirt 9.0 deletes no checkpoint of an inactive domain.
		return c.deleteInactive(ctx, lv, dom, name)
	}
	return err
}

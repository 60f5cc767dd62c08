package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt/domconfig"
)

// StartTestCopy starts cp, a copy of the domain cfg records (a standby's
// backup point). Its network is the isolation of the QEMU path's test
// failover, a network the copy's QEMU makes and that goes with it: each
// interface becomes a NIC (same model and MAC address) on QEMU's
// user-mode network with restrict=on, which reaches nothing, and only
// the probes' ports forwarded from the host's 127.0.0.1. A libvirt
// network without forward would need a bridge, so a privileged daemon,
// and a route from the prober into it. The copy's serial console goes
// to cp.ConsoleLog, its graphics are dropped, and it is marked as a
// standby's so that the inventory leaves it out.
func (c *Connector) StartTestCopy(ctx context.Context, cfg hypervisor.VMConfig, cp hypervisor.TestCopy) error {
	if !strings.HasPrefix(cp.Name, hypervisor.TestCopyPrefix) {
		return fmt.Errorf("libvirt: a test copy's name begins with %s, not %q", hypervisor.TestCopyPrefix, cp.Name)
	}
	if err := c.elsewhere(); err != nil {
		return err
	}
	var native NativeConfig
	if err := json.Unmarshal(cfg.Native, &native); err != nil || native.DomainXML == "" {
		return fmt.Errorf("libvirt: the backup point records no domain definition")
	}
	doc, err := testCopyXML(native.DomainXML, cp)
	if err != nil {
		return err
	}
	lv, err := c.client(ctx)
	if err != nil {
		return err
	}
	// Paused until marked: no inventory lists it as a VM to back up.
	dom, err := call(ctx, c.cfg.CallTimeout, "start test copy "+cp.Name, func() (golibvirt.Domain, error) {
		return lv.DomainCreateXML(doc, golibvirt.DomainStartPaused)
	})
	if err != nil {
		return err
	}
	err = do(ctx, c.cfg.CallTimeout, "mark test copy "+cp.Name, func() error {
		return lv.DomainSetMetadata(dom, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{`<standby/>`},
			golibvirt.OptString{"coffer"}, golibvirt.OptString{standbyNS}, golibvirt.DomainAffectLive)
	})
	if err == nil {
		err = do(ctx, c.cfg.CallTimeout, "resume test copy "+cp.Name, func() error { return lv.DomainResume(dom) })
	}
	if err != nil {
		return errors.Join(err, c.DestroyTestCopy(context.WithoutCancel(ctx), cp.Name))
	}
	return nil
}

// DestroyTestCopy ends the test copy named name at once; a transient
// domain is then gone. One that is gone already is no error.
func (c *Connector) DestroyTestCopy(ctx context.Context, name string) error {
	if !strings.HasPrefix(name, hypervisor.TestCopyPrefix) {
		return fmt.Errorf("libvirt: %q is not a test copy's name", name)
	}
	lv, err := c.client(ctx)
	if err != nil {
		return err
	}
	dom, err := c.lookup(ctx, lv, hypervisor.VMRef{Name: name})
	if errors.Is(err, hypervisor.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = do(ctx, c.cfg.CallTimeout, "destroy test copy "+name, func() error { return lv.DomainDestroy(dom) })
	if errors.Is(err, hypervisor.ErrNotFound) || isLibvirtError(err, golibvirt.ErrOperationInvalid) {
		return nil // it stopped (and went) meanwhile
	}
	return err
}

// qemuNS is libvirt's namespace for QEMU arguments of a domain's own.
const qemuNS = "http://libvirt.org/schemas/domain/qemu/1.0"

// testCopyXML is the definition of cp from a recorded domain's.
func testCopyXML(recorded string, cp hypervisor.TestCopy) (string, error) {
	rd, err := domconfig.ReadXML(recorded)
	if err != nil {
		return "", err
	}
	disks := map[string]newDisk{}
	keep := map[string]bool{}
	for key, path := range cp.Disks {
		disks[key] = newDisk{Path: path, Format: "qcow2"}
		keep[path] = true
	}
	if cp.UUID == "" {
		cp.UUID = newUUID()
	}
	doc, err := rewriteXML(recorded, &identity{name: cp.Name, uuid: cp.UUID, keepMACs: true}, disks)
	if err != nil {
		return "", err
	}
	if doc, err = isolateXML(doc, keep); err != nil {
		return "", err
	}
	args, err := rd.IsolatedNICs(hypervisor.HostForwards(cp.Forward))
	if err != nil {
		return "", err
	}
	var extra strings.Builder
	fmt.Fprintf(&extra, "<serial type='file'><source path=%s/><target port='0'/></serial>", quoteAttr(cp.ConsoleLog))
	i := strings.LastIndex(doc, "</devices>")
	if i < 0 {
		return "", errors.New("libvirt: recorded domain XML has no devices")
	}
	doc = doc[:i] + extra.String() + doc[i:]
	if len(args) > 0 {
		extra.Reset()
		extra.WriteString("<qemu:commandline>")
		for _, a := range args {
			fmt.Fprintf(&extra, "<qemu:arg value=%s/>", quoteAttr(a))
		}
		extra.WriteString("</qemu:commandline>")
		i = strings.LastIndex(doc, "</domain>")
		doc = doc[:i] + extra.String() + doc[i:]
		doc = strings.Replace(doc, "<domain ", "<domain xmlns:qemu='"+qemuNS+"' ", 1)
	}
	return doc, nil
}

// quoteAttr quotes an XML attribute's value (xmlEscape escapes quotes).
func quoteAttr(s string) string { return "'" + xmlEscape(s) + "'" }

// isolateXML drops from a domain's definition what a test copy must not
// share with production: its interfaces (isolated NICs replace them),
// serial ports and consoles (files or sockets of the source's), graphics
// (ports), the source paths of its channels (libvirt makes the copy's
// own), its metadata (the copy is marked through the API), and every disk that is not one of keep's files (a disk the
// replication does not keep would be the production file).
func isolateXML(doc string, keep map[string]bool) (string, error) {
	dec := xml.NewDecoder(strings.NewReader(doc))
	var out bytes.Buffer
	enc := xml.NewEncoder(&out)
	var path []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("libvirt: domain XML: %w", err)
		}
		tok = xml.CopyToken(tok)
		switch t := tok.(type) {
		case xml.StartElement:
			p := strings.Join(append(path, t.Name.Local), "/")
			drop := false
			switch p {
			case "domain/metadata", "domain/devices/interface", "domain/devices/serial", "domain/devices/console", "domain/devices/graphics",
				"domain/devices/channel/source":
				drop = true
			case "domain/devices/disk":
				sub, err := readSubtree(dec, t)
				if err != nil {
					return "", err
				}
				if diskKept(sub, keep) {
					for _, s := range sub {
						if err := enc.EncodeToken(s); err != nil {
							return "", err
						}
					}
				}
				continue
			}
			if drop {
				if _, err := readSubtree(dec, t); err != nil {
					return "", err
				}
				continue
			}
			path = append(path, t.Name.Local)
		case xml.EndElement:
			path = path[:len(path)-1]
		case xml.ProcInst, xml.Directive:
			continue
		}
		if err := enc.EncodeToken(tok); err != nil {
			return "", err
		}
	}
	if err := enc.Flush(); err != nil {
		return "", err
	}
	return out.String(), nil
}

// diskKept says whether a <disk> stays in a test copy: one of its
// overlays, or a read-only medium (a CD-ROM or floppy).
func diskKept(toks []xml.Token, keep map[string]bool) bool {
	start := toks[0].(xml.StartElement)
	if d := attr(start.Attr, "device"); d == "cdrom" || d == "floppy" {
		return true
	}
	for _, tok := range toks {
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "source" && keep[attr(s.Attr, "file")] {
			return true
		}
	}
	return false
}

package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
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

// testCopyNICs are QEMU's devices for libvirt's interface models.
var testCopyNICs = map[string]string{"": "virtio-net-pci", "virtio": "virtio-net-pci", "e1000": "e1000", "e1000e": "e1000e",
	"rtl8139": "rtl8139", "vmxnet3": "vmxnet3"}

// testCopyXML is the definition of cp from a recorded domain's.
func testCopyXML(recorded string, cp hypervisor.TestCopy) (string, error) {
	x, err := parseDomain(recorded)
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
	slots, err := nicSlots(recorded)
	if err != nil {
		return "", err
	}
	var args []string
	for i, nic := range x.Devices.Interfaces {
		dev, ok := testCopyNICs[nic.Model.Type]
		if !ok {
			return "", fmt.Errorf("libvirt: interface model %q: a test copy cannot emulate it on its isolated network", nic.Model.Type)
		}
		netdev := fmt.Sprintf("user,id=coffer-iso%d,restrict=on", i)
		if i == 0 { // the probes reach the guest through its first NIC
			netdev += hostForwards(cp.Forward)
		}
		device := fmt.Sprintf("%s,netdev=coffer-iso%d", dev, i)
		if nic.MAC.Address != "" {
			device += ",mac=" + nic.MAC.Address
		}
		if i < len(slots) {
			device += slots[i]
		}
		args = append(args, "-netdev", netdev, "-device", device)
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

// hostForwards is the hostfwd options of a user-mode netdev for forward.
func hostForwards(forward map[int]int) string {
	guest := make([]int, 0, len(forward))
	for g := range forward {
		guest = append(guest, g)
	}
	sort.Ints(guest)
	var b strings.Builder
	for _, g := range guest {
		fmt.Fprintf(&b, ",hostfwd=tcp:127.0.0.1:%d-:%d", forward[g], g)
	}
	return b.String()
}

func quoteAttr(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // a bytes.Buffer does not fail
	return "'" + strings.ReplaceAll(b.String(), "'", "&#39;") + "'"
}

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

// nicSlots are the PCI addresses of the recorded domain's interfaces, as
// QEMU device options (",bus=pci.0,addr=0x3.0"), in order: a copy's NIC
// takes the slot its interface had, which the copy's definition leaves
// free (libvirt gives every other device its address explicitly, and a
// device of QEMU's own placed anywhere could take one of them), and the
// guest finds it where it was. A domain libvirt defined records every
// address; an interface without one is refused.
func nicSlots(recorded string) ([]string, error) {
	var x struct {
		OS struct {
			Type struct {
				Machine string `xml:"machine,attr"`
			} `xml:"type"`
		} `xml:"os"`
		Interfaces []struct {
			Address struct {
				Type     string `xml:"type,attr"`
				Bus      string `xml:"bus,attr"`
				Slot     string `xml:"slot,attr"`
				Function string `xml:"function,attr"`
			} `xml:"address"`
		} `xml:"devices>interface"`
	}
	if err := xml.Unmarshal([]byte(recorded), &x); err != nil {
		return nil, fmt.Errorf("libvirt: recorded domain XML: %w", err)
	}
	var out []string
	for i, nic := range x.Interfaces {
		a := nic.Address
		bus, errB := strconv.ParseUint(strings.TrimPrefix(a.Bus, "0x"), 16, 8)
		slot, errS := strconv.ParseUint(strings.TrimPrefix(a.Slot, "0x"), 16, 8)
		fn, errF := strconv.ParseUint(strings.TrimPrefix(cmpOr(a.Function, "0x0"), "0x"), 16, 8)
		if a.Type != "pci" || errB != nil || errS != nil || errF != nil {
			return nil, fmt.Errorf("libvirt: the domain's interface %d has no PCI address (%+v): a test copy puts its NIC there", i+1, a)
		}
		name := fmt.Sprintf("pci.%d", bus)
		if bus == 0 && strings.Contains(x.OS.Type.Machine, "q35") {
			name = "pcie.0"
		}
		out = append(out, fmt.Sprintf(",bus=%s,addr=0x%x.%x", name, slot, fn))
	}
	return out, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

package libvirt

import (
	"bytes"
	"crypto/rand"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// newDisk is where a restored disk goes.
type newDisk struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	// StopOnError pauses the VM on the disk's I/O errors (instant
	// recovery: until coffer's server is back) instead of failing the
	// guest's I/O.
	StopOnError bool `json:"stop_on_error,omitempty"`
}

// rewriteDomain turns a recorded domain definition into a new domain's:
// the new name and UUID, a new MAC address on every interface (so it can
// run beside the original), and each restored disk (by target) pointing at
// its new file and format, without the original's backing chain. Every
// other element is copied as it is, token by token, so settings coffer
// does not know survive.
func rewriteDomain(doc, name, uuid string, disks map[string]newDisk) (string, error) {
	return rewriteXML(doc, &identity{name: name, uuid: uuid}, disks)
}

// rewriteDisks points a definition's disks at new files, keeping its
// identity (name, UUID, MAC addresses).
func rewriteDisks(doc string, disks map[string]newDisk) (string, error) {
	return rewriteXML(doc, nil, disks)
}

// identity is a new domain's name and UUID. keepMACs keeps the
// interfaces' addresses (a standby, which runs only instead of its
// source), and networks, when set, maps every interface's network or
// bridge to the DR site's.
type identity struct {
	name, uuid string
	keepMACs   bool
	networks   map[string]string
}

func rewriteXML(doc string, id *identity, disks map[string]newDisk) (string, error) {
	dec := xml.NewDecoder(strings.NewReader(doc))
	var out bytes.Buffer
	enc := xml.NewEncoder(&out)
	var path []string
	var skip int // depth of an element being dropped, 0 when none
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("libvirt: recorded domain XML: %w", err)
		}
		tok = xml.CopyToken(tok)
		if skip > 0 {
			switch tok.(type) {
			case xml.StartElement:
				skip++
			case xml.EndElement:
				skip--
			}
			continue
		}
		switch t := tok.(type) {
		case xml.StartElement:
			path = append(path, t.Name.Local)
			p := strings.Join(path, "/")
			switch p {
			case "domain/uuid":
				if id == nil {
					break
				}
				skip, path = 1, path[:len(path)-1]
				continue
			case "domain/devices/interface/mac":
				if id == nil || id.keepMACs {
					break
				}
				t.Attr = setAttr(t.Attr, "address", newMAC())
			case "domain/devices/interface/source":
				if id == nil || id.networks == nil {
					break
				}
				if t.Attr, err = mapNetwork(t.Attr, id.networks); err != nil {
					return "", err
				}
			case "domain/devices/disk":
				sub, err := readSubtree(dec, t)
				if err != nil {
					return "", err
				}
				path = path[:len(path)-1]
				for _, s := range rewriteDisk(sub, disks) {
					if err := enc.EncodeToken(s); err != nil {
						return "", err
					}
				}
				continue
			}
			tok = t
		case xml.EndElement:
			path = path[:len(path)-1]
		case xml.CharData:
			if id != nil && strings.Join(path, "/") == "domain/name" {
				tok = xml.CharData(id.name)
			}
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
	if id == nil {
		return out.String(), nil
	}
	// The new UUID goes right after the name, where libvirt puts it.
	s := out.String()
	i := strings.Index(s, "</name>")
	if i < 0 {
		return "", fmt.Errorf("libvirt: recorded domain XML has no name")
	}
	i += len("</name>")
	return s[:i] + "<uuid>" + id.uuid + "</uuid>" + s[i:], nil
}

// mapNetwork maps an interface source's network or bridge through
// networks; one the map does not name is an error.
func mapNetwork(attrs []xml.Attr, networks map[string]string) ([]xml.Attr, error) {
	for _, name := range []string{"network", "bridge"} {
		from := attr(attrs, name)
		if from == "" {
			continue
		}
		to, ok := networks[from]
		if !ok {
			return nil, fmt.Errorf("libvirt: the domain's %s %q is not in the networks map", name, from)
		}
		attrs = setAttr(attrs, name, to)
	}
	return attrs, nil
}

// readSubtree reads the rest of the element start opened.
func readSubtree(dec *xml.Decoder, start xml.StartElement) ([]xml.Token, error) {
	toks := []xml.Token{start}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("libvirt: recorded domain XML: %w", err)
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
		toks = append(toks, xml.CopyToken(tok))
	}
	return toks, nil
}

// rewriteDisk points one <disk> at its restored file, if it was restored.
func rewriteDisk(toks []xml.Token, disks map[string]newDisk) []xml.Token {
	target := ""
	for _, tok := range toks {
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "target" {
			target = attr(s.Attr, "dev")
		}
	}
	nd, ok := disks[target]
	if !ok {
		return toks // a CD-ROM or a disk coffer did not back up: as it was
	}
	var out []xml.Token
	skip := 0
	for i, tok := range toks {
		if skip > 0 {
			switch tok.(type) {
			case xml.StartElement:
				skip++
			case xml.EndElement:
				skip--
			}
			continue
		}
		s, ok := tok.(xml.StartElement)
		if !ok {
			out = append(out, tok)
			continue
		}
		switch {
		case i == 0:
			s.Attr = setAttr(s.Attr, "type", "file")
		case s.Name.Local == "driver":
			s.Attr = setAttr(s.Attr, "type", nd.Format)
			if nd.StopOnError {
				s.Attr = setAttr(setAttr(s.Attr, "error_policy", "stop"), "rerror_policy", "stop")
			}
		case s.Name.Local == "source":
			// A file now, whatever it was (block device, pool volume,
			// network disk): only the path stays.
			s.Attr = []xml.Attr{{Name: xml.Name{Local: "file"}, Value: nd.Path}}
			skip = 1 // drop children (a network disk's hosts, auth)
			out = append(out, s, xml.EndElement{Name: s.Name})
			continue
		case s.Name.Local == "backingStore", s.Name.Local == "mirror":
			skip = 1 // the restored image is flat
			continue
		}
		out = append(out, s)
	}
	return out
}

func attr(attrs []xml.Attr, name string) string {
	for _, a := range attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func setAttr(attrs []xml.Attr, name, value string) []xml.Attr {
	for i, a := range attrs {
		if a.Name.Local == name {
			attrs[i].Value = value
			return attrs
		}
	}
	return append(attrs, xml.Attr{Name: xml.Name{Local: name}, Value: value})
}

// newMAC is a random address in QEMU's locally administered range.
func newMAC() string {
	b := make([]byte, 3)
	rand.Read(b)
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[0], b[1], b[2])
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

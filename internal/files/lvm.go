package files

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// LVM2 support: a physical volume's label and text metadata are parsed
// here (there is no Go LVM library) to map linear logical volumes to byte
// ranges of the physical volume. Layout (LVM2 on-disk format):
//
//	label (one of the first 4 sectors): "LABELONE", sector u64, crc u32,
//	  header offset u32, "LVM2 001"
//	PV header (at label + header offset): UUID [32], size u64, then data
//	  area locations {offset u64, size u64}... {0,0}, then metadata area
//	  locations {offset u64, size u64}... {0,0}
//	metadata area: header (checksum u32, magic [16], version u32, start
//	  u64, size u64, raw locations {offset u64, size u64, checksum u32,
//	  flags u32}...) — the first raw location is the current text.

var mdaMagic = []byte(" LVM2 x[5A%r0N*>")

const maxLVMText = 4 << 20

// lvmVolumes lists the linear logical volumes of a physical volume.
func lvmVolumes(pv Volume) ([]Volume, error) {
	text, err := lvmMetadata(pv.r)
	if err != nil {
		return nil, err
	}
	root, err := parseLVMConfig(text)
	if err != nil {
		return nil, err
	}
	var out []Volume
	for vgName, vgv := range root {
		vg, ok := vgv.(lvmSection)
		if !ok {
			continue
		}
		extent := vg.int("extent_size") * 512
		pvs, _ := vg["physical_volumes"].(lvmSection)
		lvs, _ := vg["logical_volumes"].(lvmSection)
		if extent <= 0 || len(pvs) == 0 {
			continue
		}
		for lvName, lvv := range lvs {
			lv, ok := lvv.(lvmSection)
			if !ok {
				continue
			}
			v := Volume{Name: fmt.Sprintf("lvm:%s-%s", vgName, lvName), Type: ""}
			r, size, err := linearLV(pv, pvs, lv, extent)
			if err != nil {
				v.Type, v.Note = TypeUnknown, err.Error()
				out = append(out, v)
				continue
			}
			v.r, v.Size = r, size
			out = append(out, v)
		}
	}
	return out, nil
}

// linearLV maps an LV made of single-stripe segments on this PV.
func linearLV(pv Volume, pvs lvmSection, lv lvmSection, extent int64) (io.ReaderAt, int64, error) {
	var segs []lvSegment
	for k, sv := range lv {
		seg, ok := sv.(lvmSection)
		if !ok || !strings.HasPrefix(k, "segment") {
			continue
		}
		typ, _ := seg["type"].(string)
		stripes, _ := seg["stripes"].([]any)
		if typ != "striped" || seg.int("stripe_count") != 1 || len(stripes) != 2 {
			return nil, 0, fmt.Errorf("segment type %q with %d stripes is not supported (linear volumes only)", typ, seg.int("stripe_count"))
		}
		pvName, _ := stripes[0].(string)
		pvStart, _ := stripes[1].(int64)
		pvSec, ok := pvs[pvName].(lvmSection)
		if !ok {
			return nil, 0, fmt.Errorf("segment on unknown physical volume %q", pvName)
		}
		peStart := pvSec.int("pe_start") * 512
		segs = append(segs, lvSegment{
			lvStart: seg.int("start_extent") * extent,
			length:  seg.int("extent_count") * extent,
			pvOff:   peStart + pvStart*extent,
		})
	}
	if len(segs) == 0 {
		return nil, 0, errors.New("logical volume without segments")
	}
	var size int64
	for _, s := range segs {
		if s.pvOff < 0 || s.length <= 0 || s.pvOff+s.length > pv.Size {
			return nil, 0, errors.New("segment lies outside this physical volume (a volume group spanning several disks?)")
		}
		size = max(size, s.lvStart+s.length)
	}
	return &segmentReader{r: pv.r, segs: segs, size: size}, size, nil
}

type lvSegment struct{ lvStart, length, pvOff int64 }

// segmentReader reads an LV through its segment map.
type segmentReader struct {
	r    io.ReaderAt
	segs []lvSegment
	size int64
}

func (s *segmentReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= s.size {
			return n, io.EOF
		}
		var seg *lvSegment
		for i := range s.segs {
			if pos >= s.segs[i].lvStart && pos < s.segs[i].lvStart+s.segs[i].length {
				seg = &s.segs[i]
				break
			}
		}
		if seg == nil {
			return n, fmt.Errorf("offset %d of the logical volume is not mapped", pos)
		}
		k := int(min(int64(len(p)-n), seg.lvStart+seg.length-pos))
		m, err := s.r.ReadAt(p[n:n+k], seg.pvOff+(pos-seg.lvStart))
		n += m
		if err != nil && m < k {
			return n, err
		}
	}
	return n, nil
}

// lvmMetadata returns the current metadata text of a physical volume.
func lvmMetadata(r io.ReaderAt) ([]byte, error) {
	head := make([]byte, 2048)
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	label := -1
	for s := 0; s < 4; s++ {
		if string(head[s*512:s*512+8]) == "LABELONE" {
			label = s * 512
			break
		}
	}
	if label < 0 {
		return nil, errors.New("no LVM label")
	}
	hdr := label + int(binary.LittleEndian.Uint32(head[label+20:]))
	if hdr+40 > len(head) {
		return nil, errors.New("PV header outside the label sectors")
	}
	p := hdr + 32 + 8 // skip UUID and device size
	skipList := func() (first [2]uint64) {
		for i := 0; p+16 <= len(head); i++ {
			off, size := binary.LittleEndian.Uint64(head[p:]), binary.LittleEndian.Uint64(head[p+8:])
			p += 16
			if off == 0 && size == 0 {
				return
			}
			if i == 0 {
				first = [2]uint64{off, size}
			}
		}
		return
	}
	skipList() // data areas
	mda := skipList()
	if mda[0] == 0 {
		return nil, errors.New("physical volume has no metadata area")
	}
	mh := make([]byte, 512)
	if _, err := r.ReadAt(mh, int64(mda[0])); err != nil {
		return nil, err
	}
	if !bytes.Equal(mh[4:20], mdaMagic) {
		return nil, errors.New("bad metadata area magic")
	}
	textOff := binary.LittleEndian.Uint64(mh[40:])
	textLen := binary.LittleEndian.Uint64(mh[48:])
	if textLen == 0 || textLen > maxLVMText || textOff > mda[1] {
		return nil, fmt.Errorf("implausible metadata location (%d bytes at %d)", textLen, textOff)
	}
	text := make([]byte, textLen)
	// The text may wrap around the end of the circular metadata buffer.
	first := min(textLen, mda[1]-textOff)
	if _, err := r.ReadAt(text[:first], int64(mda[0]+textOff)); err != nil {
		return nil, err
	}
	if first < textLen {
		if _, err := r.ReadAt(text[first:], int64(mda[0]+512)); err != nil {
			return nil, err
		}
	}
	return bytes.TrimRight(text, "\x00"), nil
}

// lvmSection is a parsed "name { ... }" block.
type lvmSection map[string]any

func (s lvmSection) int(k string) int64 {
	v, _ := s[k].(int64)
	return v
}

// parseLVMConfig parses the LVM text format: sections, key = value with
// strings, integers and arrays, and # comments.
func parseLVMConfig(b []byte) (lvmSection, error) {
	p := &lvmParser{s: string(b)}
	sec, err := p.section(0)
	if err != nil {
		return nil, fmt.Errorf("LVM metadata: %w", err)
	}
	return sec, nil
}

type lvmParser struct {
	s   string
	pos int
}

func (p *lvmParser) skip() {
	for p.pos < len(p.s) {
		switch c := p.s[p.pos]; {
		case c == '#':
			for p.pos < len(p.s) && p.s[p.pos] != '\n' {
				p.pos++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *lvmParser) ident() string {
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '_' || c == '-' || c == '.' || c == '+' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos]
}

func (p *lvmParser) section(depth int) (lvmSection, error) {
	if depth > 16 {
		return nil, errors.New("nesting too deep")
	}
	sec := lvmSection{}
	for {
		p.skip()
		if p.pos >= len(p.s) {
			if depth > 0 {
				return nil, errors.New("unterminated section")
			}
			return sec, nil
		}
		if p.s[p.pos] == '}' {
			if depth == 0 {
				return nil, errors.New("unexpected }")
			}
			p.pos++
			return sec, nil
		}
		key := p.ident()
		if key == "" {
			return nil, fmt.Errorf("unexpected %q at offset %d", p.s[p.pos], p.pos)
		}
		p.skip()
		if p.pos >= len(p.s) {
			return nil, errors.New("truncated")
		}
		switch p.s[p.pos] {
		case '{':
			p.pos++
			sub, err := p.section(depth + 1)
			if err != nil {
				return nil, err
			}
			sec[key] = sub
		case '=':
			p.pos++
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			sec[key] = v
		default:
			return nil, fmt.Errorf("expected = or { after %q", key)
		}
	}
}

func (p *lvmParser) value() (any, error) {
	p.skip()
	if p.pos >= len(p.s) {
		return nil, errors.New("truncated value")
	}
	switch c := p.s[p.pos]; {
	case c == '"':
		end := strings.IndexByte(p.s[p.pos+1:], '"')
		if end < 0 {
			return nil, errors.New("unterminated string")
		}
		v := p.s[p.pos+1 : p.pos+1+end]
		p.pos += end + 2
		return v, nil
	case c == '[':
		p.pos++
		var arr []any
		for {
			p.skip()
			if p.pos < len(p.s) && p.s[p.pos] == ']' {
				p.pos++
				return arr, nil
			}
			if len(arr) > 1<<16 {
				return nil, errors.New("array too long")
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
			p.skip()
			if p.pos < len(p.s) && p.s[p.pos] == ',' {
				p.pos++
			}
		}
	default:
		tok := p.ident()
		var n int64
		if _, err := fmt.Sscan(tok, &n); err == nil {
			return n, nil
		}
		if tok == "" {
			return nil, fmt.Errorf("unexpected %q", c)
		}
		return tok, nil
	}
}

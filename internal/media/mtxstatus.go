package media

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// ParseMtxStatus reads the output of `mtx -f /dev/sgN status`. The VTL
// writes the same text (FormatMtxStatus) and reads it back through this
// parser, so real and virtual changers share one reading. Lines it does
// not know (the header, AlternateVolumeTag) are skipped; an element line
// that cannot be read is an error naming the line, never a guess.
//
// The lines look like:
//
//	Data Transfer Element 0:Full (Storage Element 3 Loaded):VolumeTag = CFR003L8
//	Data Transfer Element 1:Empty
//	      Storage Element 1:Full :VolumeTag=CFR001L8
//	      Storage Element 9 IMPORT/EXPORT:Empty
func ParseMtxStatus(text string) (*ChangerStatus, error) {
	st := &ChangerStatus{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		var err error
		switch {
		case strings.HasPrefix(line, "Data Transfer Element "):
			var d DriveElement
			d, err = parseDriveLine(strings.TrimPrefix(line, "Data Transfer Element "))
			st.Drives = append(st.Drives, d)
		case strings.HasPrefix(line, "Storage Element "):
			var s SlotElement
			s, err = parseSlotLine(strings.TrimPrefix(line, "Storage Element "))
			st.Slots = append(st.Slots, s)
		}
		if err != nil {
			return nil, fmt.Errorf("mtx status line %d %q: %w", n, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mtx status: %w", err)
	}
	if len(st.Drives) == 0 && len(st.Slots) == 0 {
		return nil, fmt.Errorf("mtx status: no drive or storage element in the text")
	}
	return st, nil
}

// parseDriveLine reads "0:Full (Storage Element 3 Loaded):VolumeTag = X".
func parseDriveLine(s string) (DriveElement, error) {
	num, rest, ok := strings.Cut(s, ":")
	if !ok {
		return DriveElement{}, fmt.Errorf("no ':' after the element number")
	}
	idx, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || idx < 0 {
		return DriveElement{}, fmt.Errorf("bad drive number %q", num)
	}
	d := DriveElement{Index: idx}
	switch {
	case strings.HasPrefix(rest, "Empty"):
		return d, nil
	case strings.HasPrefix(rest, "Full"):
		d.Full = true
	default:
		return d, fmt.Errorf("neither Full nor Empty")
	}
	rest = strings.TrimPrefix(rest, "Full")
	if i := strings.Index(rest, "(Storage Element "); i >= 0 {
		f := strings.Fields(rest[i+len("(Storage Element "):])
		if len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 0 {
				d.SourceSlot = n
			}
		}
	}
	d.VolumeTag = volumeTag(rest)
	return d, nil
}

// parseSlotLine reads "1:Full :VolumeTag=X" or "9 IMPORT/EXPORT:Empty".
func parseSlotLine(s string) (SlotElement, error) {
	head, rest, ok := strings.Cut(s, ":")
	if !ok {
		return SlotElement{}, fmt.Errorf("no ':' after the element number")
	}
	f := strings.Fields(head)
	if len(f) == 0 {
		return SlotElement{}, fmt.Errorf("no element number")
	}
	num, err := strconv.Atoi(f[0])
	if err != nil || num <= 0 {
		return SlotElement{}, fmt.Errorf("bad slot number %q", f[0])
	}
	sl := SlotElement{Number: num, ImportExport: len(f) > 1 && f[1] == "IMPORT/EXPORT"}
	switch {
	case strings.HasPrefix(rest, "Empty"):
	case strings.HasPrefix(rest, "Full"):
		sl.Full = true
		sl.VolumeTag = volumeTag(rest)
	default:
		return sl, fmt.Errorf("neither Full nor Empty")
	}
	return sl, nil
}

// volumeTag returns the barcode after "VolumeTag", with or without spaces
// around the '=' (mtx writes both forms), "" when there is none.
func volumeTag(s string) string {
	i := strings.Index(s, "VolumeTag")
	if i < 0 {
		return ""
	}
	v := strings.TrimSpace(s[i+len("VolumeTag"):])
	v = strings.TrimSpace(strings.TrimPrefix(v, "="))
	if f := strings.Fields(v); len(f) > 0 {
		return f[0]
	}
	return ""
}

// FormatMtxStatus writes a status as `mtx status` does.
func FormatMtxStatus(device string, st *ChangerStatus) string {
	var b strings.Builder
	ie := 0
	for _, s := range st.Slots {
		if s.ImportExport {
			ie++
		}
	}
	fmt.Fprintf(&b, "  Storage Changer %s:%d Drives, %d Slots ( %d Import/Export )\n", device, len(st.Drives), len(st.Slots), ie)
	for _, d := range st.Drives {
		if !d.Full {
			fmt.Fprintf(&b, "Data Transfer Element %d:Empty\n", d.Index)
			continue
		}
		fmt.Fprintf(&b, "Data Transfer Element %d:Full (Storage Element %d Loaded)", d.Index, d.SourceSlot)
		if d.VolumeTag != "" {
			fmt.Fprintf(&b, ":VolumeTag = %s", d.VolumeTag)
		}
		b.WriteString("\n")
	}
	for _, s := range st.Slots {
		fmt.Fprintf(&b, "      Storage Element %d", s.Number)
		if s.ImportExport {
			b.WriteString(" IMPORT/EXPORT")
		}
		if !s.Full {
			b.WriteString(":Empty\n")
			continue
		}
		b.WriteString(":Full ")
		if s.VolumeTag != "" {
			fmt.Fprintf(&b, ":VolumeTag=%s", s.VolumeTag)
		}
		b.WriteString("\n")
	}
	return b.String()
}

package qemu

import (
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Tracking bitmaps are named coffer-<chain label>-<full|inc>-<session
// tag>-<creation time, base 36 nanoseconds>: each backup chain
// (hypervisor.ChainLabel) has its own, so two policies writing to two
// repositories never consume each other's change tracking, `query-block`
// shows whose a bitmap is, and its age says how long its chain has gone
// unused. Bitmaps from before chains (coffer-<full|inc>-<tag>-<time>)
// still serve their tokens and expire like any unused chain.

// newBitmapName names a chain's new tracking bitmap.
func newBitmapName(chain string, full bool, tag string, now time.Time) string {
	kind := "inc"
	if full {
		kind = "full"
	}
	return bitmapPrefix + hypervisor.ChainLabel(chain) + "-" + kind + "-" + tag + "-" + strconv.FormatInt(now.UnixNano(), 36)
}

// bitmapMark parses a tracking bitmap's name. ok is false for anything
// else coffer names "coffer-" (a session's frozen copy) and for foreign
// bitmaps.
func bitmapMark(name string) (m hypervisor.ChainMark, full, ok bool) {
	rest, ours := strings.CutPrefix(name, bitmapPrefix)
	if !ours {
		return m, false, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) == 3 { // from before chains: no label
		parts = append([]string{""}, parts...)
	}
	if len(parts) != 4 || (parts[1] != "full" && parts[1] != "inc") {
		return m, false, false
	}
	ns, err := strconv.ParseInt(parts[3], 36, 64)
	if err != nil {
		return m, false, false
	}
	return hypervisor.ChainMark{Name: name, Label: parts[0], Created: time.Unix(0, ns)}, parts[1] == "full", true
}

// supersededBitmaps are the bitmaps of a disk that a successful backup
// which created newBitmap (after reading the changes of oldBitmap) makes
// useless:
//   - its own chain's older bitmaps, except the full anchor that the
//     chain's differentials diff against, when newBitmap is an incremental;
//   - oldBitmap, when it is an incremental bitmap from before chains;
//   - every bitmap of a chain unused for longer than the expiry;
//   - leftovers of coffer's that are no tracking bitmap at all.
//
// Foreign bitmaps are never touched.
func supersededBitmaps(bitmaps []bitmapInfo, newBitmap, oldBitmap string, expiry hypervisor.ChainExpiry) []string {
	own, newFull, _ := bitmapMark(newBitmap)
	var marks []hypervisor.ChainMark
	var out []string
	for _, b := range bitmaps {
		if b.Name == newBitmap || !strings.HasPrefix(b.Name, bitmapPrefix) {
			continue
		}
		m, full, ok := bitmapMark(b.Name)
		switch {
		case !ok:
			out = append(out, b.Name)
		case m.Label == own.Label:
			if newFull || !full || b.Inconsistent {
				out = append(out, b.Name)
			}
		case m.Label == "" && b.Name == oldBitmap && !full:
			out = append(out, b.Name)
		default:
			marks = append(marks, m)
		}
	}
	return append(out, expiry.Expired(marks, own.Label)...)
}

package verify

import (
	"fmt"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// maxLost bounds the lost chunks traced individually: beyond it the
// repository is so damaged that counting is what matters.
const maxLost = 1 << 20

// cause is one reason chunks were lost (a missing pack, a pack's broken
// blobs, chunks in no index) with the points it affects.
type cause struct {
	kind, object, detail string
	chunks               int
	affects              map[string]*Affected // point/disk -> spans
	order                []string
	copies               []repo.BadChunk // broken copies, for the damage record
}

// chunks joins the referenced chunk IDs with the index entries (both
// sorted by chunk ID): a referenced chunk is intact if at least one of its
// copies is in a pack that exists, long enough, whose blob authenticated
// (when read) and that the damage record does not list as broken.
func (c *checker) chunks(refs, byID *extsort.Cursor) error {
	var cur id.ID
	var copies []index.Location
	have := false
	judge := func() {
		if !have {
			return
		}
		have = false
		good := false
		for _, loc := range copies {
			if c.usable(cur, loc) {
				good = true
				break
			}
		}
		if !good {
			c.lose(cur, copies)
		}
	}
	for byID.Valid() {
		e := index.GetRecord(byID.Record())
		if err := byID.Next(); err != nil {
			return err
		}
		if have && e.ID == cur {
			copies = append(copies, e.Location)
			continue
		}
		judge()
		// Referenced chunks before e.ID have no copy at all.
		for refs.Valid() && id.ID(refs.Record()).Less(e.ID) {
			c.lose(id.ID(refs.Record()), nil)
			if err := refs.Next(); err != nil {
				return err
			}
		}
		if refs.Valid() && id.ID(refs.Record()) == e.ID {
			cur, copies, have = e.ID, append(copies[:0], e.Location), true
			if err := refs.Next(); err != nil {
				return err
			}
		}
	}
	judge()
	var err error
	for ; refs.Valid(); err = refs.Next() {
		if err != nil {
			return err
		}
		c.lose(id.ID(refs.Record()), nil)
	}
	return err
}

// usable reports whether one copy of chunk x can be read.
func (c *checker) usable(x id.ID, loc index.Location) bool {
	if t, bad := c.badPacks[loc.Pack]; bad {
		if t.kind != "truncated-pack" || int64(loc.Offset)+int64(loc.Length) > t.size {
			return false
		}
	}
	if _, broken := c.brokenAt[location{loc.Pack, loc.Offset}]; broken {
		return false
	}
	return !c.r.BrokenCopy(x, loc)
}

// lose records a referenced chunk without a good copy, under its cause.
func (c *checker) lose(x id.ID, copies []index.Location) {
	if len(c.lost) >= maxLost {
		return
	}
	kind, object, detail := "missing-chunk", "chunks in no index", "chunks that backup points reference are in no index segment"
	var bad []repo.BadChunk
	for _, loc := range copies {
		b := repo.BadChunk{Chunk: x, Pack: loc.Pack, Offset: loc.Offset, Found: time.Now().UTC()}
		if t, ok := c.badPacks[loc.Pack]; ok {
			kind, object, detail = t.kind, pack.ObjectName(loc.Pack), t.detail
			b.Detail = t.detail
		} else if bc, ok := c.brokenAt[location{loc.Pack, loc.Offset}]; ok {
			kind, object, detail = "corrupt-chunk", pack.ObjectName(loc.Pack), "chunk blobs in this pack fail authentication"
			b.Detail = bc.why
		} else {
			kind, object, detail = "corrupt-chunk", pack.ObjectName(loc.Pack), "chunk copies recorded as broken by an earlier verify"
			b.Detail = "recorded as broken"
		}
		bad = append(bad, b)
	}
	if len(copies) == 0 {
		bad = append(bad, repo.BadChunk{Chunk: x, Found: time.Now().UTC(), Detail: "in no index segment"})
	}
	key := kind + " " + object
	cs := c.causes[key]
	if cs == nil {
		cs = &cause{kind: kind, object: object, detail: detail, affects: map[string]*Affected{}}
		c.causes[key] = cs
	}
	cs.chunks++
	cs.copies = append(cs.copies, bad...)
	c.lost[x] = key
}

// recoverable looks for chunks that no index lists in the pack trailers:
// a damaged or lost index segment loses no data while the packs list
// their chunks, and `coffer repair index` indexes them again. A copy found
// so counts only if it is not recorded broken and, with ReadData (in a
// selected pack), its blob authenticates: otherwise the chunk is lost
// to that broken copy.
func (c *checker) recoverable() error {
	const missing = "missing-chunk chunks in no index"
	cs := c.causes[missing]
	if cs == nil {
		return nil
	}
	found := 0
	var broken []index.Entry
	err := c.r.Store().List(c.ctx, "data/", func(fi store.ObjectInfo) error {
		p, err := pack.ParseObjectName(fi.Name)
		if err != nil {
			return nil
		}
		entries, err := c.r.PackEntries(c.ctx, p, fi.Size)
		if err != nil {
			if damage(err) {
				return nil // its trailer is unreadable: nothing to recover from it here
			}
			return err
		}
		for _, e := range entries {
			if c.lost[e.ID] != missing {
				continue
			}
			loc := index.Location{Pack: p, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength}
			if bad, err := c.brokenBlob(e.ID, loc); err != nil {
				return err
			} else if bad {
				broken = append(broken, index.Entry{ID: e.ID, Location: loc})
				continue
			}
			delete(c.lost, e.ID)
			found++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if found+len(broken) == 0 {
		return nil
	}
	// Chunks found only as broken copies are lost to those copies.
	cs.chunks -= found + len(broken)
	for _, e := range broken {
		delete(c.lost, e.ID)
		c.lose(e.ID, []index.Location{e.Location})
	}
	kept := cs.copies[:0]
	for _, b := range cs.copies {
		if c.lost[b.Chunk] == missing {
			kept = append(kept, b)
		}
	}
	cs.copies = kept
	if cs.chunks == 0 {
		delete(c.causes, missing)
	}
	if found == 0 {
		return nil
	}
	note := fmt.Sprintf("%d chunk(s) that backup points use are in no readable index segment, but their packs list them: no data is lost, the index is incomplete", found)
	amended := false
	for i, p := range c.rep.Problems {
		if p.Kind == "index-segment" {
			c.rep.Problems[i].Detail += "; " + note
			amended = true
		}
	}
	if !amended {
		c.problem(Problem{Kind: "index-segment", Object: "index/", Repair: repairIndex, Detail: note})
	}
	return nil
}

// brokenBlob reports whether a chunk copy that only a pack's trailer
// lists is broken: recorded so, or, when verify reads this pack's data,
// failing authentication (then it is kept as a broken copy).
func (c *checker) brokenBlob(x id.ID, loc index.Location) (bool, error) {
	if c.r.BrokenCopy(x, loc) {
		return true, nil
	}
	if !c.o.ReadData || !c.o.selected(loc.Pack) {
		return false, nil
	}
	if c.dec == nil {
		dec, err := c.r.NewDecoder()
		if err != nil {
			return false, err
		}
		c.dec = dec
	}
	sealed, err := c.r.ReadBlob(c.ctx, loc)
	if err == nil {
		c.buf, err = c.dec.Decode(c.buf[:0], sealed, x, int(loc.RawLength))
	}
	if err == nil {
		return false, nil
	}
	if !damage(err) {
		return false, err
	}
	c.brokenAt[location{loc.Pack, loc.Offset}] = brokenCopy{x, errText(err)}
	return true, nil
}

// trace finds, for every lost chunk, the points, disks and offsets that
// use it, then turns causes and pack troubles into problems.
func (c *checker) trace() error {
	if len(c.lost) > 0 {
		for _, s := range c.snaps {
			for _, d := range s.Disks {
				err := c.scanMap(s, d, func(i uint64, x id.ID) error {
					key, ok := c.lost[x]
					if !ok {
						return nil
					}
					cs := c.causes[key]
					k := s.ID.String() + "\x00" + d.Key
					af := cs.affects[k]
					if af == nil {
						af = &Affected{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name, Offset: int64(i) * int64(d.ChunkSize)}
						cs.affects[k] = af
						cs.order = append(cs.order, k)
					}
					af.Spans++
					if l := c.pointsOf[x]; len(l) == 0 || l[len(l)-1] != af.Snapshot {
						c.pointsOf[x] = append(l, af.Snapshot)
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
		// scanMap reported damaged maps once already: drop the repeats.
		c.dedupMapProblems()
	}
	keys := make([]string, 0, len(c.causes))
	for k := range c.causes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cs := c.causes[k]
		p := Problem{Kind: cs.kind, Object: cs.object, DataLoss: true, Repair: structuralRepair(cs.kind)}
		for _, ak := range cs.order {
			p.Affects = append(p.Affects, *cs.affects[ak])
		}
		p.Detail = fmt.Sprintf("%s: %d chunk(s) that backup points use have no readable copy", cs.detail, cs.chunks)
		if len(p.Affects) == 0 {
			p.DataLoss = false
			p.Detail = fmt.Sprintf("%s: %d chunk(s) without a readable copy, used by no backup point", cs.detail, cs.chunks)
		}
		c.problem(p)
	}
	for p, t := range c.badPacks {
		if _, reported := c.causes[t.kind+" "+pack.ObjectName(p)]; reported {
			continue
		}
		rp := repairIndex
		if t.kind == "truncated-pack" || t.kind == "unreadable-pack" {
			rp = repairPacks
		}
		c.problem(Problem{Kind: t.kind, Object: pack.ObjectName(p), Repair: rp,
			Detail: t.detail + "; no backup lost data (every chunk it held that a point uses has another copy, or none is used)"})
	}
	// Broken copies of chunks that have a good copy elsewhere: the pack
	// still needs mending, no data is lost.
	// A lost chunk is reported with the cause that lost it (the blobs
	// past the end of a truncated pack are broken copies too, whose
	// cause is truncated-pack): it has no other copy.
	perPack := map[pack.ID]int{}
	for loc, bc := range c.brokenAt {
		if _, lost := c.lost[bc.chunk]; !lost {
			perPack[loc.pack]++
		}
	}
	for p, n := range perPack {
		if _, reported := c.causes["corrupt-chunk "+pack.ObjectName(p)]; reported {
			continue
		}
		c.problem(Problem{Kind: "corrupt-chunk", Object: pack.ObjectName(p), Repair: repairPacks,
			Detail: fmt.Sprintf("%d chunk blob(s) fail authentication; no backup lost data (each has another copy, or no point uses it)", n)})
	}
	return nil
}

// structuralRepair is what mends the repository after chunks were lost to
// a cause (the lost chunks themselves come back from their source).
func structuralRepair(kind string) string {
	switch kind {
	case "missing-pack":
		return repairIndex
	case "missing-chunk":
		return healByBackup
	}
	return repairPacks
}

// dedupMapProblems removes the second report of a damaged disk map that
// trace's second scan of the maps added.
func (c *checker) dedupMapProblems() {
	seen := map[string]bool{}
	out := c.rep.Problems[:0]
	for _, p := range c.rep.Problems {
		if p.Kind == "disk-map" {
			k := p.Object + "\x00" + p.Detail
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, p)
	}
	c.rep.Problems = out
}

// record adds the broken copies found to the repository's damage record,
// with the points that used them, so no later backup builds on them and no
// restore reads a broken copy where a good one exists.
func (c *checker) record() error {
	if c.o.NoRecord {
		return nil
	}
	var add []repo.BadChunk
	seen := map[location]bool{}
	placeless := map[id.ID]bool{} // chunks recorded without a place
	for _, b := range c.r.Damage() {
		if b.Pack == (pack.ID{}) {
			placeless[b.Chunk] = true
		}
	}
	keep := func(b repo.BadChunk) {
		at := location{b.Pack, b.Offset}
		switch {
		case b.Pack == (pack.ID{}) && placeless[b.Chunk]:
			return // recorded by an earlier verify
		case b.Pack == (pack.ID{}):
			placeless[b.Chunk] = true
		case seen[at] || c.r.BrokenCopy(b.Chunk, index.Location{Pack: b.Pack, Offset: b.Offset}):
			return
		}
		seen[at] = true
		b.Points = c.pointsOf[b.Chunk]
		add = append(add, b)
	}
	for _, cs := range c.causes {
		for _, b := range cs.copies {
			keep(b)
		}
	}
	for loc, bc := range c.brokenAt {
		keep(repo.BadChunk{Chunk: bc.chunk, Pack: loc.pack, Offset: loc.offset, Found: time.Now().UTC(), Detail: bc.why})
	}
	if len(add) == 0 {
		return nil
	}
	if err := c.r.RecordDamage(c.ctx, add); err != nil {
		return err
	}
	c.rep.Recorded = len(add)
	return nil
}

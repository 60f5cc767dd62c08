package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// The damage record remembers what verification found broken, so that no
// later backup builds on it: a chunk whose stored copy failed to
// authenticate (or whose pack is gone) is treated as absent. Lookups skip
// its bad location, deduplication stores the chunk again, and a backup
// re-reads the spans that used it even where change tracking says they did
// not change. The new copy heals every point that references the chunk,
// since points reference chunks by ID. This is Benji's "mark bad blocks,
// then heal", and Proxmox Backup Server's refusal to base a backup on a
// failed verification, in one mechanism.
//
// Each verification that finds damage writes one object damage/<random ID>
// (sealed, append-only, so concurrent verifications never overwrite each
// other); maintenance (gc, repair) merges them into one and drops what no
// longer matters. The record is small: it grows with damage, not with the
// repository.
const (
	damagePrefix = "damage/"
	damageSeal   = "damage"
)

// LostChunk is the ID a disk map records for a span whose chunk is known
// lost (written by `coffer repair snapshots` for the spans of a damaged
// disk map block). No index lists it, so a coffer that does not know it
// fails to read such a span instead of restoring zeros silently.
var LostChunk = id.ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// BadChunk is one chunk copy found broken.
type BadChunk struct {
	Chunk id.ID `json:"chunk"`
	// Pack and Offset locate the broken copy; a zero Pack means the chunk
	// had no location at all (missing from the index).
	Pack   pack.ID   `json:"pack"`
	Offset uint32    `json:"offset"`
	Found  time.Time `json:"found"`
	Detail string    `json:"detail"`
	// Points are the backup points that used the chunk when it was found.
	Points []string `json:"points,omitempty"`
}

// damageRecord is the loaded record: small, kept in memory.
type damageRecord struct {
	mu      sync.RWMutex
	objects []string
	byChunk map[id.ID][]BadChunk
}

func (d *damageRecord) add(b BadChunk) {
	for _, have := range d.byChunk[b.Chunk] {
		if have.Pack == b.Pack && have.Offset == b.Offset {
			return
		}
	}
	d.byChunk[b.Chunk] = append(d.byChunk[b.Chunk], b)
}

// bad reports whether loc is a recorded broken copy of chunk x.
func (d *damageRecord) bad(x id.ID, loc index.Location) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, b := range d.byChunk[x] {
		if b.Pack == loc.Pack && b.Offset == loc.Offset {
			return true
		}
	}
	return false
}

var (
	damageEnc, _ = zstd.NewWriter(nil)
	damageDec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(256<<20))
)

// loadDamage reads every damage object. An unreadable one is skipped with
// a warning: losing the record only means a backup may deduplicate against
// a chunk verification already reported, which the next verify finds again.
func (r *Repository) loadDamage(ctx context.Context) error {
	d := &damageRecord{byChunk: map[id.ID][]BadChunk{}}
	err := r.st.List(ctx, damagePrefix, func(fi store.ObjectInfo) error {
		list, err := r.readDamage(ctx, fi.Name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			r.log.Warn("skipping an unreadable damage record", "object", fi.Name, "err", err)
			return nil
		}
		d.objects = append(d.objects, fi.Name)
		for _, b := range list {
			d.add(b)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read damage record: %w", err)
	}
	r.damage.Store(d)
	r.Index().SetBad(d.bad)
	return nil
}

func (r *Repository) readDamage(ctx context.Context, name string) ([]BadChunk, error) {
	b, err := store.Get(ctx, r.st, name, 0, -1)
	if err != nil {
		return nil, err
	}
	comp, err := r.key.Open(nil, b, damageSeal)
	if err != nil {
		return nil, err
	}
	raw, err := damageDec.DecodeAll(comp, nil)
	if err != nil {
		return nil, err
	}
	var list []BadChunk
	return list, json.Unmarshal(raw, &list)
}

// RecordDamage adds broken chunk copies to the record (a new object) and
// to this process's view, so lookups skip them from now on.
func (r *Repository) RecordDamage(ctx context.Context, bad []BadChunk) error {
	if len(bad) == 0 {
		return nil
	}
	name, err := r.writeDamage(ctx, bad)
	if err != nil {
		return err
	}
	d := r.damage.Load()
	d.mu.Lock()
	d.objects = append(d.objects, name)
	for _, b := range bad {
		d.add(b)
	}
	d.mu.Unlock()
	return nil
}

func (r *Repository) writeDamage(ctx context.Context, bad []BadChunk) (string, error) {
	raw, err := json.Marshal(bad)
	if err != nil {
		return "", err
	}
	name := damagePrefix + id.Random().String()
	if _, err := store.Put(ctx, r.st, name, r.key.Seal(nil, damageEnc.EncodeAll(raw, nil), damageSeal), store.PutOptions{}); err != nil {
		return "", fmt.Errorf("write damage record: %w", err)
	}
	return name, nil
}

// Damage returns every recorded broken copy, ordered by chunk.
func (r *Repository) Damage() []BadChunk {
	d := r.damage.Load()
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []BadChunk
	for _, list := range d.byChunk {
		out = append(out, list...)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].Chunk.Compare(out[j].Chunk); c != 0 {
			return c < 0
		}
		return out[i].Pack.String() < out[j].Pack.String()
	})
	return out
}

// LostChunks returns the recorded chunks that have no good copy left: the
// index knows no location for them that is not recorded as broken. These
// are what a backup must read and store again.
func (r *Repository) LostChunks(ctx context.Context) (map[id.ID]bool, error) {
	d := r.damage.Load()
	d.mu.RLock()
	ids := make([]id.ID, 0, len(d.byChunk))
	for x := range d.byChunk {
		ids = append(ids, x)
	}
	d.mu.RUnlock()
	lost := map[id.ID]bool{}
	for _, x := range ids {
		_, ok, err := r.Index().Lookup(ctx, x)
		if err != nil {
			return nil, err
		}
		if !ok {
			lost[x] = true
		}
	}
	return lost, nil
}

// DamagedPoints maps each backup point still affected by a lost chunk to
// the chunks it lacks (as recorded when verification traced them).
func (r *Repository) DamagedPoints(ctx context.Context) (map[string][]id.ID, error) {
	lost, err := r.LostChunks(ctx)
	if err != nil || len(lost) == 0 {
		return nil, err
	}
	out := map[string][]id.ID{}
	for _, b := range r.Damage() {
		if !lost[b.Chunk] {
			continue
		}
		for _, p := range b.Points {
			if l := out[p]; len(l) == 0 || l[len(l)-1] != b.Chunk {
				out[p] = append(l, b.Chunk)
			}
		}
	}
	return out, nil
}

// RewriteDamage replaces the damage objects with one holding what fn
// returns for each entry (false drops it): maintenance forgets chunks no
// point references any more, and a rewritten pack's broken copies become
// entries without a place. Callers hold the maintenance lease. The new
// object is written before the old ones are deleted, so a crash leaves
// duplicates, never a loss.
func (r *Repository) RewriteDamage(ctx context.Context, fn func(BadChunk) (BadChunk, bool)) (dropped int, err error) {
	d := r.damage.Load()
	d.mu.RLock()
	old := append([]string(nil), d.objects...)
	d.mu.RUnlock()
	if len(old) == 0 {
		return 0, nil
	}
	var kept []BadChunk
	for _, b := range r.Damage() {
		if nb, keep := fn(b); keep {
			kept = append(kept, nb)
		} else {
			dropped++
		}
	}
	nd := &damageRecord{byChunk: map[id.ID][]BadChunk{}}
	if len(kept) > 0 {
		name, err := r.writeDamage(ctx, kept)
		if err != nil {
			return 0, err
		}
		nd.objects = []string{name}
		for _, b := range kept {
			nd.add(b)
		}
	}
	for _, name := range old {
		if err := r.st.Delete(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.log.Warn("old damage record left for the next run", "object", name, "err", err)
			nd.objects = append(nd.objects, name)
		}
	}
	r.damage.Store(nd)
	r.Index().SetBad(nd.bad)
	return dropped, nil
}

// BrokenCopy reports whether the damage record lists this copy of chunk x.
func (r *Repository) BrokenCopy(x id.ID, loc index.Location) bool {
	return r.damage.Load().bad(x, loc)
}

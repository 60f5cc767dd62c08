package repair

import (
	"context"
	"errors"
	"sort"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// indexedIn collects the current index's entries that lie in the given
// packs (a set bounded by the damage found), grouped by pack, in offset
// order.
func indexedIn(ctx context.Context, r *repo.Repository, packs map[pack.ID]int64) (map[pack.ID][]index.Entry, error) {
	out := map[pack.ID][]index.Entry{}
	err := r.Index().Iterate(ctx, func(e index.Entry) error {
		if _, ok := packs[e.Pack]; ok {
			out[e.Pack] = append(out[e.Pack], e)
		}
		return nil
	})
	if err != nil && !errors.Is(err, index.ErrFormat) {
		return nil, err
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return list[i].Offset < list[j].Offset })
	}
	return out, nil
}

// salvage reads what is left of one pack and calls keep for every entry
// whose blob is there and authenticates (decrypts, decompresses and
// re-hashes to its chunk ID). It returns how many it kept and dropped.
func salvage(ctx context.Context, r *repo.Repository, p pack.ID, size int64, entries []index.Entry, keep func(e index.Entry, sealed []byte) error) (kept, dropped int, err error) {
	raw, err := store.Get(ctx, r.Store(), pack.ObjectName(p), 0, size)
	if errors.Is(err, store.ErrNotFound) {
		return 0, len(entries), nil
	}
	if err != nil {
		return 0, 0, err
	}
	dec, err := r.NewDecoder()
	if err != nil {
		return 0, 0, err
	}
	var buf []byte
	for _, e := range entries {
		end := int64(e.Offset) + int64(e.Length)
		if end > int64(len(raw)) {
			dropped++
			continue
		}
		sealed := raw[e.Offset:end]
		if buf, err = dec.Decode(buf[:0], sealed, e.ID, int(e.RawLength)); err != nil {
			dropped++
			continue
		}
		if err := keep(e, sealed); err != nil {
			return kept, dropped, err
		}
		kept++
	}
	return kept, dropped, nil
}

// salvageEntries keeps the authenticated index entries of packs whose
// trailer cannot be read.
func salvageEntries(ctx context.Context, r *repo.Repository, packs map[pack.ID]int64, keep func(index.Entry) error) (kept, dropped int, err error) {
	byPack, err := indexedIn(ctx, r, packs)
	if err != nil {
		return 0, 0, err
	}
	for p, size := range packs {
		k, d, err := salvage(ctx, r, p, size, byPack[p], func(e index.Entry, _ []byte) error { return keep(e) })
		if err != nil {
			return kept, dropped, err
		}
		kept, dropped = kept+k, dropped+d
	}
	return kept, dropped, nil
}

package gc

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

const (
	planName = "gc/plan"
	planSeal = "gc-plan"
	// partPrefix names the objects that list a plan's packs and disk maps:
	// gc/part-<plan ID>-<list>-<sequence>.
	partPrefix = "gc/part-"
	partSeal   = "gc-plan-part"
	// clockSkew is the largest difference between the clocks of hosts that
	// share a repository that garbage collection tolerates.
	clockSkew = time.Minute
)

// planFile is the durable record of deletions waiting for sessions to end.
// It is small whatever the repository's size: the packs and disk maps to
// delete are listed, in ascending order, in part objects it names.
type planFile struct {
	ID        string    `json:"id,omitempty"` // names the part objects
	Created   time.Time `json:"created"`
	MarkTime  time.Time `json:"mark_time"`
	Sessions  []string  `json:"sessions"`  // leases live when the plan was made
	Snapshots []string  `json:"snapshots"` // backup points the mark saw
	PackParts []string  `json:"pack_parts,omitempty"`
	MapParts  []string  `json:"map_parts,omitempty"`
	Segments  []string  `json:"segments"`
	Compacted string    `json:"compacted,omitempty"`
	// Packs and Maps list the objects inline in plans written before the
	// lists moved to parts; such a plan is still carried out.
	Packs []string `json:"packs,omitempty"`
	Maps  []string `json:"maps,omitempty"`
}

func newPlanID() string {
	x := id.Random()
	return hex.EncodeToString(x[:8])
}

// partNames is how many names one part holds (about 1.2 MiB of text):
// execution reads one part at a time, whatever the plan's size. Tests
// lower it.
var partNames = 1 << 15

var (
	planEnc, _ = zstd.NewWriter(nil)
	planDec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(1<<30))
)

func savePlan(ctx context.Context, r *repo.Repository, pf *planFile) error {
	raw, err := json.Marshal(pf)
	if err != nil {
		return err
	}
	_, err = store.Put(ctx, r.Store(), planName, r.Key().Seal(nil, planEnc.EncodeAll(raw, nil), planSeal), store.PutOptions{})
	return err
}

func loadPlan(ctx context.Context, r *repo.Repository) (*planFile, error) {
	raw, err := openSealed(ctx, r, planName, planSeal)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoPlan
	}
	if err != nil {
		return nil, err
	}
	pf := &planFile{}
	return pf, json.Unmarshal(raw, pf)
}

func openSealed(ctx context.Context, r *repo.Repository, name, seal string) ([]byte, error) {
	b, err := store.Get(ctx, r.Store(), name, 0, -1)
	if err != nil {
		return nil, err
	}
	comp, err := r.Key().Open(nil, b, seal)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	raw, err := planDec.DecodeAll(comp, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return raw, nil
}

// listWriter writes names, which must come in ascending order, into the
// part objects of one list of a plan.
type listWriter struct {
	ctx    context.Context
	r      *repo.Repository
	prefix string
	buf    []byte
	n      int
	last   string
	parts  []string
}

func newListWriter(ctx context.Context, r *repo.Repository, planID, list string) *listWriter {
	return &listWriter{ctx: ctx, r: r, prefix: partPrefix + planID + "-" + list + "-"}
}

func (w *listWriter) add(name string) error {
	if strings.ContainsRune(name, '\n') {
		return fmt.Errorf("gc plan: object name %q holds a newline", name)
	}
	if w.n > 0 || len(w.parts) > 0 {
		if name <= w.last {
			return fmt.Errorf("gc plan: %s listed after %s", name, w.last)
		}
	}
	w.buf = append(append(w.buf, name...), '\n')
	w.last = name
	w.n++
	if w.n == partNames {
		return w.flush()
	}
	return nil
}

func (w *listWriter) flush() error {
	if w.n == 0 {
		return nil
	}
	name := fmt.Sprintf("%s%06d", w.prefix, len(w.parts))
	sealed := w.r.Key().Seal(nil, planEnc.EncodeAll(w.buf, nil), partSeal)
	if _, err := store.Put(w.ctx, w.r.Store(), name, sealed, store.PutOptions{}); err != nil {
		return fmt.Errorf("write gc plan part: %w", err)
	}
	w.parts = append(w.parts, name)
	w.buf, w.n = w.buf[:0], 0
	return nil
}

// finish writes the last part and returns the names of all parts.
func (w *listWriter) finish() ([]string, error) {
	err := w.flush()
	return w.parts, err
}

// readList calls fn with every name of a plan's list in ascending order:
// the inline names of an older plan (sorted here), then those of its parts,
// one part in memory at a time. Names out of order stop it: the merge-joins
// of execute rely on the order to decide what to keep.
func readList(ctx context.Context, r *repo.Repository, inline, parts []string, fn func(name string) error) error {
	last, started := "", false
	next := func(name string) error {
		if started && name <= last {
			return fmt.Errorf("%w: the gc plan lists %s after %s", errAbort, name, last)
		}
		last, started = name, true
		return fn(name)
	}
	for _, name := range slices.Sorted(slices.Values(inline)) {
		if err := next(name); err != nil {
			return err
		}
	}
	for _, part := range parts {
		raw, err := openSealed(ctx, r, part, partSeal)
		if err != nil {
			return fmt.Errorf("gc plan part: %w", err)
		}
		for line := range strings.Lines(string(raw)) {
			if err := next(strings.TrimSuffix(line, "\n")); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeStaleParts deletes the part objects that the current plan (nil:
// there is none) does not name: those of a plan that was carried out or
// replaced, or of one that a kill kept from being saved. gc holds the
// maintenance lease, so no other gc is writing parts meanwhile.
func removeStaleParts(ctx context.Context, r *repo.Repository, current *planFile) {
	keep := "\x00"
	if current != nil && current.ID != "" {
		keep = partPrefix + current.ID + "-"
	}
	var stale []string
	err := r.Store().List(ctx, partPrefix, func(fi store.ObjectInfo) error {
		if !strings.HasPrefix(fi.Name, keep) {
			stale = append(stale, fi.Name)
		}
		return nil
	})
	for _, name := range stale {
		if err == nil {
			if err = r.Store().Delete(ctx, name); errors.Is(err, store.ErrNotFound) {
				err = nil
			}
		}
	}
	if err != nil {
		r.Logger().Warn("gc could not remove the lists of an earlier plan; the next run retries", "err", err)
	}
}

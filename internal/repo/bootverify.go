package repo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// Boot verification results live beside the points they prove, one object
// per point (bootverify/<point ID>), sealed like every repository object:
// a point itself never changes (it may be locked), and the result must
// survive the loss of the catalog. The document is the verifier's own
// (internal/bootverify); the repository only keeps it.
const (
	bootVerifyPrefix = "bootverify/"
	bootVerifySeal   = "bootverify"
)

// PutBootVerification stores the latest boot verification of point,
// replacing an earlier one (a new object version on a versioned bucket).
func (r *Repository) PutBootVerification(ctx context.Context, point id.ID, doc []byte) error {
	sealed := r.key.Seal(nil, damageEnc.EncodeAll(doc, nil), bootVerifySeal)
	if _, err := store.Put(ctx, r.st, bootVerifyPrefix+point.String(), sealed, store.PutOptions{}); err != nil {
		return fmt.Errorf("store the boot verification of %s: %w", point.Short(), err)
	}
	return nil
}

// BootVerification reads the boot verification of point; store.ErrNotFound
// when it was never verified.
func (r *Repository) BootVerification(ctx context.Context, point id.ID) ([]byte, error) {
	return r.readBootVerification(ctx, bootVerifyPrefix+point.String())
}

func (r *Repository) readBootVerification(ctx context.Context, name string) ([]byte, error) {
	b, err := store.Get(ctx, r.st, name, 0, -1)
	if err != nil {
		return nil, err
	}
	comp, err := r.key.Open(nil, b, bootVerifySeal)
	if err != nil {
		return nil, fmt.Errorf("boot verification %s: %w", name, err)
	}
	return damageDec.DecodeAll(comp, nil)
}

// BootVerifications reads every stored boot verification, by point. An
// unreadable one is skipped with a warning: it only loses the column.
func (r *Repository) BootVerifications(ctx context.Context) (map[id.ID][]byte, error) {
	out := map[id.ID][]byte{}
	err := r.st.List(ctx, bootVerifyPrefix, func(fi store.ObjectInfo) error {
		x, err := id.Parse(strings.TrimPrefix(fi.Name, bootVerifyPrefix))
		if err != nil {
			return nil
		}
		doc, err := r.readBootVerification(ctx, fi.Name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			r.log.Warn("skipping an unreadable boot verification", "object", fi.Name, "err", err)
			return nil
		}
		out[x] = doc
		return nil
	})
	return out, err
}

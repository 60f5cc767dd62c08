package catalogexport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
)

// DefaultPartSize bounds a part's lines: the memory an export holds at a
// time is about twice it (the lines, then their compressed seal).
const DefaultPartSize = 8 << 20

// Options tune an export.
type Options struct {
	// History exports the jobs' history too (catalog.History tables).
	History bool
	// Reason is recorded in the manifest ("manual", "schedule",
	// "before migration").
	Reason string
	// Coffer is the exporting coffer's version, for the manifest.
	Coffer string
	// PartSize bounds a part's lines (DefaultPartSize when 0).
	PartSize int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Export copies the exported tables of the catalog into the repository as
// a new export, all of them read in one snapshot of the catalog. An
// export that fails deletes what it wrote.
func Export(ctx context.Context, d catalog.Dumper, r *repo.Repository, o Options) (Manifest, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	now := o.Now().UTC()
	w := &partWriter{ctx: ctx, r: r, id: newID(now), size: o.PartSize}
	m := Manifest{Format: FormatVersion, ID: w.id, Created: now, Coffer: o.Coffer, History: o.History, Reason: o.Reason}
	tables, err := tablesOf(ctx, d, o.History)
	if err != nil {
		return Manifest{}, fmt.Errorf("catalog export: %w", err)
	}
	schema, err := d.Dump(ctx, tables, w)
	if err == nil {
		err = w.flush()
	}
	if err == nil {
		m.Schema, m.Tables, m.Parts = schema, w.tables, w.parts
		err = w.putManifest(m)
	}
	if err != nil {
		return Manifest{}, errors.Join(fmt.Errorf("catalog export %s: %w", w.id, err), w.cleanup(ctx))
	}
	return m, nil
}

// tablesOf lists the exported tables the catalog's schema has: a catalog
// exported before it is migrated may lack tables a later migration adds.
func tablesOf(ctx context.Context, d catalog.Dumper, history bool) ([]string, error) {
	has, err := d.SchemaTables(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range catalog.ExportedTables(history) {
		if slices.Contains(has, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// partWriter is the catalog.DumpWriter that cuts the dump into parts and
// stores each as it fills.
type partWriter struct {
	ctx    context.Context
	r      *repo.Repository
	id     string
	size   int
	buf    []byte
	tables []TableInfo
	parts  []PartInfo
	// written are the objects stored so far, which a failure deletes.
	written []string
}

func (w *partWriter) Table(name string, columns []string) error {
	w.tables = append(w.tables, TableInfo{Name: name, Columns: columns})
	w.buf = appendHeader(w.buf, name, columns)
	return nil
}

func (w *partWriter) Row(values []any) error {
	t := &w.tables[len(w.tables)-1]
	var err error
	if w.buf, err = appendRow(w.buf, values); err != nil {
		return fmt.Errorf("table %s, row %d: %w", t.Name, t.Rows+1, err)
	}
	t.Rows++
	if len(w.buf) < w.size {
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	// The next part begins with the header of the table it goes on with.
	w.buf = appendHeader(w.buf, t.Name, t.Columns)
	return nil
}

// flush stores the lines gathered as the next part.
func (w *partWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	name := fmt.Sprintf("part-%06d", len(w.parts)+1)
	w.written = append(w.written, name)
	stored, err := w.r.PutCatalogExportObject(w.ctx, w.id, name, w.buf)
	if err != nil {
		return fmt.Errorf("part %s: %w", name, err)
	}
	sum := sha256.Sum256(w.buf)
	w.parts = append(w.parts, PartInfo{Name: name, Bytes: int64(len(w.buf)), Stored: stored, SHA256: hex.EncodeToString(sum[:])})
	w.buf = w.buf[:0]
	return nil
}

func (w *partWriter) putManifest(m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	w.written = append(w.written, ManifestName)
	if _, err := w.r.PutCatalogExportObject(w.ctx, w.id, ManifestName, b); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

// cleanup deletes what a failed export wrote, even once ctx is cancelled
// (bounded by a minute): the manifest first, so that what may be left
// is never taken for an export.
func (w *partWriter) cleanup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var errs []error
	for i := len(w.written) - 1; i >= 0; i-- {
		if err := w.r.DeleteCatalogExportObject(ctx, w.id, w.written[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("and what it wrote could not all be deleted: %w", errors.Join(errs...))
	}
	return nil
}

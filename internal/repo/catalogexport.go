package repo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/coffer-backup/coffer/internal/store"
)

// Exports of the server's catalog (internal/catalog/catalogexport) live in
// the repository so that they survive the server: the objects of one
// export under catalog-exports/<export ID>/, each compressed and sealed
// like every repository object, its seal bound to its export and name so
// that no object passes for another. The repository only keeps them; the
// format of their contents is the exporter's.
const (
	catalogExportPrefix = "catalog-exports/"
	catalogExportSeal   = "catalog-export/"
)

// catalogExportEnc compresses the objects of exports: parts of up to
// 8 MiB, one at a time. Its single encoder keeps a history of one window
// (lower encoder memory) where the default keeps two per encoder and one
// encoder per core: 32 MiB live on two cores, a third of an export's
// memory (bench/catalogexport measured it).
var catalogExportEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))

func catalogExportName(exportID, name string) string {
	return catalogExportPrefix + exportID + "/" + name
}

// PutCatalogExportObject stores one object of a catalog export, replacing
// one of the same name. It returns the bytes stored.
func (r *Repository) PutCatalogExportObject(ctx context.Context, exportID, name string, plain []byte) (int64, error) {
	full := catalogExportName(exportID, name)
	sealed := r.key.Seal(nil, catalogExportEnc.EncodeAll(plain, nil), catalogExportSeal+exportID+"/"+name)
	if _, err := store.Put(ctx, r.st, full, sealed, store.PutOptions{}); err != nil {
		return 0, fmt.Errorf("store %s: %w", full, err)
	}
	return int64(len(sealed)), nil
}

// CatalogExportObject reads back an object of a catalog export;
// store.ErrNotFound when there is none of that name.
func (r *Repository) CatalogExportObject(ctx context.Context, exportID, name string) ([]byte, error) {
	full := catalogExportName(exportID, name)
	b, err := store.Get(ctx, r.st, full, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", full, err)
	}
	comp, err := r.key.Open(nil, b, catalogExportSeal+exportID+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", full, err)
	}
	plain, err := damageDec.DecodeAll(comp, nil)
	if err != nil {
		return nil, fmt.Errorf("decompress %s: %w", full, err)
	}
	return plain, nil
}

// CatalogExportObjects lists the names of an export's objects, sorted.
func (r *Repository) CatalogExportObjects(ctx context.Context, exportID string) ([]string, error) {
	prefix := catalogExportName(exportID, "")
	var out []string
	err := r.st.List(ctx, prefix, func(fi store.ObjectInfo) error {
		out = append(out, strings.TrimPrefix(fi.Name, prefix))
		return nil
	})
	sort.Strings(out)
	return out, err
}

// CatalogExportIDs lists the IDs of the exports that have an object
// named marker (their manifest: the exports that were completed), or of
// every export with marker "", sorted.
func (r *Repository) CatalogExportIDs(ctx context.Context, marker string) ([]string, error) {
	seen := map[string]bool{}
	err := r.st.List(ctx, catalogExportPrefix, func(fi store.ObjectInfo) error {
		rest := strings.TrimPrefix(fi.Name, catalogExportPrefix)
		if exportID, name, found := strings.Cut(rest, "/"); found && (marker == "" || name == marker) {
			seen[exportID] = true
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for x := range seen {
		out = append(out, x)
	}
	sort.Strings(out)
	return out, err
}

// DeleteCatalogExportObject deletes one object of an export; deleting one
// that is gone is not an error.
func (r *Repository) DeleteCatalogExportObject(ctx context.Context, exportID, name string) error {
	err := r.st.Delete(ctx, catalogExportName(exportID, name))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("delete %s: %w", catalogExportName(exportID, name), err)
	}
	return nil
}

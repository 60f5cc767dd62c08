package repoops

import (
	"context"
	"errors"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogexport"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqldump"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/version"
)

// The server's own recovery (issue 39): its catalog's state exported into
// a repository, listed, and imported on a new host.

// ExportCatalog exports the catalog's state into the repository, then
// deletes all but the Keep newest exports.
func (s Ops) ExportCatalog(ctx context.Context, call *api.ExportCatalogInput) (*api.CatalogExportResult, error) {
	in := call.Body
	if in.Reason == "" {
		in.Reason = "manual"
	}
	return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.NoLease, func(r *repo.Repository) (*api.CatalogExportResult, error) {
		return withDumper(ctx, s, func(d catalog.Dumper) (*api.CatalogExportResult, error) {
			m, err := catalogexport.Export(ctx, d, r, catalogexport.Options{History: in.History, Reason: in.Reason, Coffer: version.Get().Version})
			if err != nil {
				return nil, err
			}
			res := &api.CatalogExportResult{Export: exportDoc(m), Deleted: []string{}}
			deleted, err := catalogexport.Prune(ctx, r, in.Keep, time.Now())
			res.Deleted = append(res.Deleted, deleted...)
			if err != nil {
				return res, api.Errorf(api.Partial, "export %s made, but older exports could not all be deleted: %v", m.ID, err)
			}
			return res, nil
		})
	})
}

// CatalogExports lists the repository's exports of the catalog, newest
// first.
func (s Ops) CatalogExports(ctx context.Context, call *api.RepoParam) ([]api.CatalogExport, error) {
	return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.NoLease, func(r *repo.Repository) ([]api.CatalogExport, error) {
		ms, err := catalogexport.List(ctx, r)
		if err != nil {
			return nil, err
		}
		out := make([]api.CatalogExport, 0, len(ms))
		for _, m := range ms {
			out = append(out, exportDoc(m))
		}
		return out, nil
	})
}

// CatalogExport describes one export.
func (s Ops) CatalogExport(ctx context.Context, call *api.CatalogExportInput) (*api.CatalogExport, error) {
	if err := catalogexport.CheckID(call.Export); err != nil {
		return nil, api.WithClass(api.Invalid, err)
	}
	return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.NoLease, func(r *repo.Repository) (*api.CatalogExport, error) {
		m, err := catalogexport.Get(ctx, r, call.Export)
		if err != nil {
			return nil, exportError(err)
		}
		doc := exportDoc(m)
		return &doc, nil
	})
}

// ImportCatalog imports an export into the catalog in one transaction.
func (s Ops) ImportCatalog(ctx context.Context, call *api.ImportCatalogInput) (*api.CatalogImport, error) {
	in := call.Body
	if in.Export != "" {
		if err := catalogexport.CheckID(in.Export); err != nil {
			return nil, api.WithClass(api.Invalid, err)
		}
	}
	return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.NoLease, func(r *repo.Repository) (*api.CatalogImport, error) {
		return withDumper(ctx, s, func(d catalog.Dumper) (*api.CatalogImport, error) {
			m, err := catalogexport.Import(ctx, d, r, catalogexport.ImportOptions{ID: in.Export, Force: in.Force})
			if err != nil {
				return nil, exportError(err)
			}
			return &api.CatalogImport{Export: exportDoc(m),
				Next: "coffer catalog rebuild, for each repository: the backup points come from the repositories"}, nil
		})
	})
}

// withDumper runs fn with the catalog, which must copy its tables (the
// SQL catalogs do).
func withDumper[T any](ctx context.Context, s Ops, fn func(catalog.Dumper) (T, error)) (T, error) {
	var zero T
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return zero, err
	}
	defer c.Close()
	d, ok := sqldump.Of(c)
	if !ok {
		return zero, api.Errorf(api.Invalid, "this catalog (%T) cannot be exported", c)
	}
	return fn(d)
}

// exportError gives the errors of exports their classes.
func exportError(err error) error {
	switch {
	case errors.Is(err, catalogexport.ErrDamaged):
		return api.WithClass(api.Integrity, err)
	case errors.Is(err, catalogexport.ErrInvalidID):
		return api.WithClass(api.Invalid, err)
	case errors.Is(err, catalogexport.ErrNotFound):
		return api.WithClass(api.NotFound, err)
	case errors.Is(err, catalog.ErrNotEmpty):
		return api.Errorf(api.Conflict, "%v: import into a new catalog, or force it to replace what this one holds", err)
	case errors.Is(err, catalogexport.ErrSchema):
		return api.WithClass(api.UnsupportedVersion, err)
	}
	return err
}

func exportDoc(m catalogexport.Manifest) api.CatalogExport {
	doc := api.CatalogExport{ID: m.ID, Created: m.Created, Coffer: m.Coffer, Schema: m.Schema, History: m.History,
		Reason: m.Reason, Rows: m.Rows(), Parts: len(m.Parts), StoredBytes: m.StoredBytes(), Tables: []api.CatalogExportTable{}}
	for _, t := range m.Tables {
		doc.Tables = append(doc.Tables, api.CatalogExportTable{Name: t.Name, Rows: t.Rows})
	}
	return doc
}

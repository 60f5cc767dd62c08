package api

import "time"

// ExportCatalogRequest exports the server's state (the catalog's tables
// that nothing else can bring back) into the repository.
type ExportCatalogRequest struct {
	History bool `json:"history,omitempty" doc:"export the jobs' history (jobs, tasks, their logs) too"`
	Keep    int  `json:"keep,omitempty" minimum:"0" maximum:"10000" doc:"then delete all but this many newest exports (0: keep them all)"`
	// Reason is recorded in the export: manual, schedule, or before
	// migration.
	Reason string `json:"reason,omitempty" enum:"manual,schedule,before-migration" doc:"why it is made (default manual)"`
}

// ImportCatalogRequest imports an export of the catalog.
type ImportCatalogRequest struct {
	Export string `json:"export,omitempty" maxLength:"64" doc:"the export's ID (default: the newest)"`
	Force  bool   `json:"force,omitempty" doc:"replace what the catalog holds (refused otherwise when it is not empty)"`
}

// CatalogExport is one export of the server's catalog in a repository.
type CatalogExport struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// Coffer is the version that exported, Schema its catalog's schema.
	Coffer      string               `json:"coffer"`
	Schema      int                  `json:"schema"`
	History     bool                 `json:"history"`
	Reason      string               `json:"reason"`
	Rows        int64                `json:"rows"`
	Parts       int                  `json:"parts"`
	StoredBytes int64                `json:"stored_bytes"`
	Tables      []CatalogExportTable `json:"tables"`
}

// CatalogExportTable is one table of an export.
type CatalogExportTable struct {
	Name string `json:"name"`
	Rows int64  `json:"rows"`
}

// CatalogExportResult is what an export made, and the older exports it
// deleted to keep the newest.
type CatalogExportResult struct {
	Export  CatalogExport `json:"export"`
	Deleted []string      `json:"deleted"`
}

// CatalogImport is what an import brought back.
type CatalogImport struct {
	Export CatalogExport `json:"export"`
	// Next says what to do next: rebuild the points from the
	// repositories.
	Next string `json:"next"`
}

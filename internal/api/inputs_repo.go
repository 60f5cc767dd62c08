package api

import "time"

// The inputs of the repository operations (see input.go): the operations
// whose input is only the repository take a RepoParam.

// InitRepositoryInput creates a repository.
type InitRepositoryInput struct {
	RepoParam
	Body InitRequest
}

// ListPointsInput lists a repository's points, from the repository.
type ListPointsInput struct {
	RepoParam
	VM    string `query:"vm" maxLength:"255" doc:"only the points of this source name"`
	Point string `query:"point" maxLength:"64" doc:"only this point: its ID, a unique ID prefix, or latest (reads one manifest, not all)"`
}

// ListCatalogPointsInput lists a page of the catalog's points.
type ListCatalogPointsInput struct {
	VM         string `query:"vm" maxLength:"255" doc:"a VM's name or ID"`
	Repository string `query:"repository" maxLength:"255" doc:"a repository's ID, or its name in the server's configuration"`
	Limit      int    `query:"limit" minimum:"0" maximum:"1000" doc:"the page's size, newest first (0: 100)"`
	After      string `query:"after" maxLength:"200" doc:"the Coffer-Next header of the previous page: this page continues after it"`
}

// ForgetInput removes a repository's points no keep rule selects.
type ForgetInput struct {
	RepoParam
	Body ForgetRequest
}

// Within is the keep-within rule as a duration.
func (k KeepRules) Within() time.Duration { return seconds(k.WithinSeconds) }

// seconds is a request's seconds as a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ProtectInput protects points of a repository, or releases them.
type ProtectInput struct {
	RepoParam
	Body ProtectRequest
}

// GCInput collects a repository's garbage.
type GCInput struct {
	RepoParam
	Body GCRequest
}

// Wait is how long gc waits for running sessions.
func (g GCRequest) Wait() time.Duration { return seconds(g.WaitSeconds) }

// CopyInput copies points of a repository to another of the server's
// configuration.
type CopyInput struct {
	RepoParam
	To   string `query:"to" required:"true" minLength:"1" maxLength:"255" doc:"the target repository's name in the server's configuration"`
	Body CopyRequest
}

// RepairInput runs one repair on a repository.
type RepairInput struct {
	RepoParam
	What string `path:"what" enum:"config,keys,index,packs,snapshots"`
	Body RepairRequest
}

// AddKeyInput adds a password to a repository.
type AddKeyInput struct {
	RepoParam
	Body AddKeyRequest
}

// RemoveKeyInput removes a repository's key.
type RemoveKeyInput struct {
	RepoParam
	Key string `path:"key" maxLength:"64" doc:"a key's ID or unique prefix"`
}

// ExportCatalogInput exports the server's state into a repository.
type ExportCatalogInput struct {
	RepoParam
	Body ExportCatalogRequest
}

// CatalogExportInput names one export of the catalog in a repository.
type CatalogExportInput struct {
	RepoParam
	Export string `path:"export" maxLength:"64" doc:"an export's ID, like 20261207T051500Z-0123abcd"`
}

// ImportCatalogInput brings the server's state back from a repository.
type ImportCatalogInput struct {
	RepoParam
	Body ImportCatalogRequest
}

// Package catalogexport keeps the state of the server that nothing else
// can bring back (users, tokens, ACLs, configuration objects made through
// the API, the audit log, notification state, the media inventory: the
// tables internal/catalog/tables.go declares exported) in a repository,
// sealed with the repository's key, one export per ID (issue 39: the
// server's own recovery).
//
// An export is parts and a manifest under catalog-exports/<ID>/. Each part
// holds lines of JSON: a table's header ({"table":..., "columns":[...]})
// then its rows as arrays, in the portable values of catalog.Dumper; a
// table may go on in the next part, which repeats its header. The
// manifest, written last, lists the tables with their row counts and the
// parts with their SHA-256: an export without a manifest is unfinished
// and is neither listed nor imported.
package catalogexport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

// ManifestName is the object that completes an export.
const ManifestName = "manifest"

// FormatVersion is the version of the parts' and the manifest's format.
const FormatVersion = 1

// ErrInvalidID: not the form of an export's ID (a request's error).
var ErrInvalidID = errors.New("not an export ID (like 20261207T051500Z-0123abcd)")

// ErrNotFound: the repository has no finished export of that ID, or none
// at all.
var ErrNotFound = errors.New("no such catalog export in the repository")

var idForm = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}(\.[0-9]{3})?Z-[0-9a-f]{8}$`)

// idTime is the time an export's ID begins with.
const idTime = "20060102T150405.000Z"

// CheckID refuses what is not an export's ID.
func CheckID(id string) error {
	if !idForm.MatchString(id) {
		return fmt.Errorf("%q: %w", id, ErrInvalidID)
	}
	return nil
}

// newID names an export by its time to the millisecond (so that IDs sort
// by age, also two exports of one second) and a random suffix (so that
// two servers exporting at once never collide).
func newID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return now.UTC().Format(idTime) + "-" + hex.EncodeToString(b[:])
}

// Manifest describes a finished export.
type Manifest struct {
	Format  int       `json:"format"`
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// Coffer is the version of coffer that exported; Schema the
	// catalog's schema version then.
	Coffer string `json:"coffer"`
	Schema int    `json:"schema"`
	// History: the jobs' history was exported too.
	History bool        `json:"history"`
	Reason  string      `json:"reason,omitempty"` // "manual", "schedule", "before migration"
	Tables  []TableInfo `json:"tables"`
	Parts   []PartInfo  `json:"parts"`
}

// TableInfo is one table of an export.
type TableInfo struct {
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
	Rows    int64    `json:"rows"`
}

// PartInfo is one part of an export.
type PartInfo struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`  // its lines
	Stored int64  `json:"stored"` // compressed and sealed, in the repository
	SHA256 string `json:"sha256"` // of its lines
}

// Rows is the number of rows exported.
func (m Manifest) Rows() int64 {
	n := int64(0)
	for _, t := range m.Tables {
		n += t.Rows
	}
	return n
}

// StoredBytes is what the export takes in the repository.
func (m Manifest) StoredBytes() int64 {
	n := int64(0)
	for _, p := range m.Parts {
		n += p.Stored
	}
	return n
}

// TableNames lists the tables exported, in order.
func (m Manifest) TableNames() []string {
	out := make([]string, len(m.Tables))
	for i, t := range m.Tables {
		out[i] = t.Name
	}
	return out
}

// Get reads the manifest of export id.
func Get(ctx context.Context, r *repo.Repository, id string) (Manifest, error) {
	if err := CheckID(id); err != nil {
		return Manifest{}, err
	}
	b, err := r.CatalogExportObject(ctx, id, ManifestName)
	if errors.Is(err, store.ErrNotFound) {
		return Manifest{}, fmt.Errorf("export %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("export %s: %w", id, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("export %s: manifest: %w", id, err)
	}
	if m.Format != FormatVersion || m.ID != id {
		return Manifest{}, fmt.Errorf("export %s: a manifest of format %d for export %q, this coffer reads format %d",
			id, m.Format, m.ID, FormatVersion)
	}
	return m, nil
}

// List reads the manifests of every finished export, newest first.
func List(ctx context.Context, r *repo.Repository) ([]Manifest, error) {
	ids, err := r.CatalogExportIDs(ctx, ManifestName)
	if err != nil {
		return nil, fmt.Errorf("list the catalog exports: %w", err)
	}
	out := make([]Manifest, 0, len(ids))
	for _, id := range slices.Backward(ids) {
		if CheckID(id) != nil {
			continue // not an export's: left alone
		}
		m, err := Get(ctx, r, id)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Newest is the newest finished export, ErrNotFound when there is none.
func Newest(ctx context.Context, r *repo.Repository) (Manifest, error) {
	ids, err := r.CatalogExportIDs(ctx, ManifestName)
	if err != nil {
		return Manifest{}, fmt.Errorf("list the catalog exports: %w", err)
	}
	for _, id := range slices.Backward(ids) {
		if CheckID(id) == nil {
			return Get(ctx, r, id)
		}
	}
	return Manifest{}, ErrNotFound
}

package actions

import (
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// The server's own recovery on the console: the exports of its state
// (users, tokens, ACLs, configuration objects, audit log) that a
// repository keeps, made by hand here as `coffer catalog export
// --to-repository` makes them, listed newest first (`coffer catalog
// exports`) and described one by one (`coffer catalog exports ID`).
// Importing one is not here: it brings a lost server back on a new host,
// before anyone can sign in to it.

type exportsView struct {
	Repo    string
	Exports []api.CatalogExport
	// Made is the export this request made, and Deleted the older ones
	// it deleted to keep the newest.
	Made    *api.CatalogExport
	Deleted []string
}

// catalogExports lists the repository's exports of the server's state.
func catalogExports(p Page) {
	showExports(p, exportsView{Repo: p.Value("repo")})
}

// showExports shows the page, or its list alone to htmx (after an
// export).
func showExports(p Page, v exportsView) {
	if err := p.Call("list-catalog-exports", map[string]string{"repo": v.Repo}, nil, nil, &v.Exports); err != nil {
		p.Fail(err)
		return
	}
	if p.HTMX() {
		p.Fragment("catalogexports/list", v)
		return
	}
	p.Show("catalogexports", "Exports of the server's state in "+v.Repo, "repositories", v)
}

// exportCatalog exports the server's state into the repository, then
// lists the exports with the new one marked.
func exportCatalog(p Page) {
	f, repo := p.Form(), p.Value("repo")
	body := api.ExportCatalogRequest{History: f.Get("history") == "1", Reason: "manual"}
	if keep := strings.TrimSpace(f.Get("keep")); keep != "" {
		n, err := strconv.Atoi(keep)
		if err != nil || n < 0 || n > 10000 {
			refuse(p, "keep is how many newest exports to keep: a whole number from 0 (all of them) to 10000")
			return
		}
		body.Keep = n
	}
	var res api.CatalogExportResult
	if err := p.Call("export-catalog", map[string]string{"repo": repo}, nil, body, &res); err != nil {
		p.Fail(err)
		return
	}
	showExports(p, exportsView{Repo: repo, Made: &res.Export, Deleted: res.Deleted})
}

type exportView struct {
	Repo   string
	Export api.CatalogExport
}

// catalogExport describes one export: its tables and their rows.
func catalogExport(p Page) {
	repo := p.Value("repo")
	var e api.CatalogExport
	if err := p.Call("get-catalog-export", map[string]string{"repo": repo, "export": p.Value("export")}, nil, nil, &e); err != nil {
		p.Fail(err)
		return
	}
	p.Show("catalogexport", "Export "+e.ID, "repositories", exportView{Repo: repo, Export: e})
}

// undelete brings back the objects of the repository's storage that
// deletes hid (versioned storage with object lock), as `coffer repair
// undelete`.
func undelete(p Page) {
	var rep api.UndeleteReport
	if err := p.Call("undelete", map[string]string{"repo": p.Value("repo")}, nil, nil, &rep); err != nil {
		p.Fail(err)
		return
	}
	p.Fragment("repositories/undeleted", rep)
}

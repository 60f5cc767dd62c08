package console

import (
	"github.com/coffer-backup/coffer/internal/api"
)

// A repository's keys (passwords that open it) and its repair, on the
// Repositories page.

// addKey adds a password to the repository (add-key).
func (p *page) addKey() {
	f := p.form()
	if f.Get("password") != f.Get("again") {
		p.fail(&apiError{Status: 400, Class: api.Invalid, Detail: "the two passwords differ: type the same one twice"})
		return
	}
	var k api.Key
	if _, err := p.api.call("add-key", map[string]string{"repo": p.repo()}, nil,
		api.AddKeyRequest{Password: f.Get("password"), Label: f.Get("label")}, &k); err != nil {
		p.fail(err)
		return
	}
	p.done("Key "+shortKey(k.ID)+" is added: its password opens "+p.repo()+" too.", "/ui/repositories")
}

// removeKey removes a key (remove-key); the API refuses the key the
// server itself opens the repository with.
func (p *page) removeKey() {
	var out api.KeyRemoval
	if _, err := p.api.call("remove-key", map[string]string{"repo": p.repo(), "key": p.r.PathValue("key")}, nil, nil, &out); err != nil {
		p.fail(err)
		return
	}
	p.done("Key "+shortKey(out.Removed)+" is removed: its password no longer opens "+p.repo()+".", "/ui/repositories")
}

func shortKey(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

type repairView struct {
	Repo, What string
	Report     api.RepairReport
}

// repair shows what a repair of one part of the repository would do
// (dry run), or does it once the plan was shown ("apply").
func (p *page) repair() {
	f := p.form()
	what := f.Get("what")
	var rep api.RepairReport
	if _, err := p.api.call("repair", map[string]string{"repo": p.repo(), "what": what}, nil,
		api.RepairRequest{DryRun: f.Get("apply") != "1"}, &rep); err != nil {
		p.fail(err)
		return
	}
	p.fragment("repositories/repaired", repairView{Repo: p.repo(), What: what, Report: rep})
}

// rebuildCatalog recreates the catalog's backup points of a repository
// from its manifests (rebuild-catalog, as `coffer catalog rebuild`);
// the manifests it could not read are listed.
func (p *page) rebuildCatalog() {
	var r api.CatalogRebuild
	if _, err := p.api.call("rebuild-catalog", map[string]string{"repo": p.repo()}, nil, nil, &r); err != nil && r.Repository == "" {
		p.fail(err)
		return
	}
	p.fragment("repositories/rebuilt", rebuiltView{Repo: p.repo(), CatalogRebuild: r})
}

// rebuiltView is a rebuild's answer under its repository's name (the
// answer names the repository by its ID).
type rebuiltView struct {
	Repo string
	api.CatalogRebuild
}

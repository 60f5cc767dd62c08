package actions

import (
	"github.com/coffer-backup/coffer/internal/api"
)

// A repository's keys (passwords that open it), its repair and its
// catalog's rebuild, on the Repositories page.

// addKey adds a password to the repository (add-key).
func addKey(p Page) {
	f, repo := p.Form(), p.Value("repo")
	if f.Get("password") != f.Get("again") {
		refuse(p, "the two passwords differ: type the same one twice")
		return
	}
	var k api.Key
	if err := p.Call("add-key", map[string]string{"repo": repo}, nil,
		api.AddKeyRequest{Password: f.Get("password"), Label: f.Get("label")}, &k); err != nil {
		p.Fail(err)
		return
	}
	p.Done("Key "+shortKey(k.ID)+" is added: its password opens "+repo+" too.", "/ui/repositories")
}

// removeKey removes a key (remove-key); the API refuses the key the
// server itself opens the repository with.
func removeKey(p Page) {
	repo := p.Value("repo")
	var out api.KeyRemoval
	if err := p.Call("remove-key", map[string]string{"repo": repo, "key": p.Value("key")}, nil, nil, &out); err != nil {
		p.Fail(err)
		return
	}
	p.Done("Key "+shortKey(out.Removed)+" is removed: its password no longer opens "+repo+".", "/ui/repositories")
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
func repair(p Page) {
	f, repo := p.Form(), p.Value("repo")
	what := f.Get("what")
	var rep api.RepairReport
	if err := p.Call("repair", map[string]string{"repo": repo, "what": what}, nil,
		api.RepairRequest{DryRun: f.Get("apply") != "1"}, &rep); err != nil {
		p.Fail(err)
		return
	}
	p.Fragment("repositories/repaired", repairView{Repo: repo, What: what, Report: rep})
}

// rebuildCatalog recreates the catalog's backup points of a repository
// from its manifests (rebuild-catalog, as `coffer catalog rebuild`);
// the manifests it could not read are listed.
func rebuildCatalog(p Page) {
	repo := p.Value("repo")
	var r api.CatalogRebuild
	if err := p.Call("rebuild-catalog", map[string]string{"repo": repo}, nil, nil, &r); err != nil && r.Repository == "" {
		p.Fail(err)
		return
	}
	p.Fragment("repositories/rebuilt", rebuiltView{Repo: repo, CatalogRebuild: r})
}

// rebuiltView is a rebuild's answer under its repository's name (the
// answer names the repository by its ID).
type rebuiltView struct {
	Repo string
	api.CatalogRebuild
}

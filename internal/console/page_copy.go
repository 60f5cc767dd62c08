package console

import (
	"github.com/coffer-backup/coffer/internal/api"
)

// The copies a point's page offers (package actions copies).

// copyTargets are where the point's page offers to copy it: the other
// repositories, and the libraries the caller may see (none when it may
// not list them: the form is left out, not the page).
func (p *page) copyTargets() (repos, libraries []string) {
	for _, r := range p.c.cfg.Repositories(p.r.Context()) {
		if r != p.repo() {
			repos = append(repos, r)
		}
	}
	var libs []api.ConfigObject
	if _, err := p.api.call("list-media-libraries", nil, nil, nil, &libs); err == nil {
		for _, o := range libs {
			if !o.Overridden {
				libraries = append(libraries, o.Name)
			}
		}
	}
	return repos, libraries
}

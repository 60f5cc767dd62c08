package console

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Copies of one point from its page: to a second repository of the
// server's configuration (copy), or to a media pool of a library
// (media-copy); each runs as a task whose live page the browser follows.

// copyPoint copies the point to another repository.
func (p *page) copyPoint() {
	to := strings.TrimSpace(p.form().Get("to"))
	if to == "" || to == p.repo() {
		p.refuse("choose the repository to copy to: another than " + p.repo())
		return
	}
	body := api.CopyRequest{Points: []string{p.r.PathValue("point")}}
	id, err := p.startTask("copy", map[string]string{"repo": p.repo()}, url.Values{"to": {to}}, body, nil)
	p.started(id, err, "The point is copied.")
}

// copyPointToMedia copies the point to a media pool of a library.
func (p *page) copyPointToMedia() {
	f := p.form()
	library := strings.TrimSpace(f.Get("library"))
	body := api.MediaCopyRequest{Pool: strings.TrimSpace(f.Get("pool")), Points: []string{p.r.PathValue("point")}}
	if library == "" || body.Pool == "" {
		p.refuse("choose the library and name the media pool to copy to")
		return
	}
	if days := strings.TrimSpace(f.Get("retention_days")); days != "" {
		d, err := strconv.ParseFloat(days, 64)
		if err != nil || d < 0 {
			p.refuse("the retention is a number of days, 0 or more")
			return
		}
		body.RetentionSeconds = d * 86400
	}
	id, err := p.startTask("media-copy", map[string]string{"repo": p.repo()}, url.Values{"library": {library}}, body, nil)
	p.started(id, err, "The point is copied to tape.")
}

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

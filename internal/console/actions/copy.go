package actions

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
func copyPoint(p Page) {
	repo := p.Value("repo")
	to := strings.TrimSpace(p.Form().Get("to"))
	if to == "" || to == repo {
		refuse(p, "choose the repository to copy to: another than "+repo)
		return
	}
	body := api.CopyRequest{Points: []string{p.Value("point")}}
	id, err := p.StartTask("copy", map[string]string{"repo": repo}, url.Values{"to": {to}}, body, nil)
	p.Started(id, err, "The point is copied.")
}

// copyPointToMedia copies the point to a media pool of a library.
func copyPointToMedia(p Page) {
	f := p.Form()
	library := strings.TrimSpace(f.Get("library"))
	body := api.MediaCopyRequest{Pool: strings.TrimSpace(f.Get("pool")), Points: []string{p.Value("point")}}
	if library == "" || body.Pool == "" {
		refuse(p, "choose the library and name the media pool to copy to")
		return
	}
	if days := strings.TrimSpace(f.Get("retention_days")); days != "" {
		d, err := strconv.ParseFloat(days, 64)
		if err != nil || d < 0 {
			refuse(p, "the retention is a number of days, 0 or more")
			return
		}
		body.RetentionSeconds = d * 86400
	}
	id, err := p.StartTask("media-copy", map[string]string{"repo": p.Value("repo")}, url.Values{"library": {library}}, body, nil)
	p.Started(id, err, "The point is copied to tape.")
}

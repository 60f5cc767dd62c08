package console

import (
	"archive/tar"
	"errors"
	"github.com/coffer-backup/coffer/internal/console/format"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// The file browser of a backup point: read straight from the repository
// (files-list, files-find), no mounting; one file downloads as itself, a
// folder as a zip or tar archive (files-archive).

type filesView struct {
	Repo, Point, Disk, Path string
	Crumbs                  []crumb
	Volumes                 []api.Volume
	Entries                 []api.FileEntry
	Warnings                []api.Warning
	Pager                   format.Pager
	Pattern                 string
	Found                   *api.FilesFind
}

type crumb struct{ Name, Path string }

func (p *page) filesParams() (map[string]string, url.Values) {
	params := map[string]string{"repo": p.repo(), "point": p.r.PathValue("point")}
	q := url.Values{}
	if d := p.r.URL.Query().Get("disk"); d != "" {
		q.Set("disk", d)
	}
	return params, q
}

func (p *page) files() {
	params, q := p.filesParams()
	qp := p.r.URL.Query()
	v := filesView{Repo: params["repo"], Point: params["point"], Disk: q.Get("disk"), Path: cleanPath(qp.Get("path")), Pattern: qp.Get("pattern")}
	v.Crumbs = crumbs(v.Path)
	if _, err := p.api.call("files-volumes", params, q, nil, &v.Volumes); err != nil {
		p.fail(err)
		return
	}
	if v.Pattern != "" {
		fq := url.Values{"pattern": {v.Pattern}, "under": {v.Path}}
		for k, vs := range q {
			fq[k] = vs
		}
		v.Found = &api.FilesFind{}
		if _, err := p.api.call("files-find", params, fq, nil, v.Found); err != nil && len(v.Found.Entries) == 0 {
			p.fail(err)
			return
		}
		if len(v.Found.Entries) > 500 {
			v.Found.Entries = v.Found.Entries[:500]
		}
	} else {
		lq := url.Values{"path": {v.Path}}
		for k, vs := range q {
			lq[k] = vs
		}
		var listing api.FilesListing
		if _, err := p.api.call("files-list", params, lq, nil, &listing); err != nil && listing.Entries == nil {
			p.fail(err)
			return
		}
		sort.SliceStable(listing.Entries, func(i, j int) bool {
			di, dj := listing.Entries[i].Type == "dir", listing.Entries[j].Type == "dir"
			if di != dj {
				return di
			}
			return listing.Entries[i].Name < listing.Entries[j].Name
		})
		v.Warnings = listing.Warnings
		base := url.Values{"path": {v.Path}}
		if v.Disk != "" {
			base.Set("disk", v.Disk)
		}
		v.Entries, v.Pager = format.PageOf(listing.Entries, pageSize, p.r, base, p.r.URL.Path)
	}
	p.show("files", "Files of "+shortRef(v.Point), "points", v)
}

func shortRef(ref string) string { return ref[:min(len(ref), 8)] }

// cleanPath is an absolute path inside the disk's file system.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	return path.Clean("/" + p)
}

func crumbs(p string) []crumb {
	out := []crumb{{Name: "/", Path: "/"}}
	if p == "/" {
		return out
	}
	acc := ""
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		acc += "/" + part
		out = append(out, crumb{Name: part, Path: acc})
	}
	return out
}

// download sends one file as itself: the API's tar archive of that path,
// unpacked on the way.
func (p *page) download() {
	params, q := p.filesParams()
	file := cleanPath(p.r.URL.Query().Get("path"))
	q.Set("path", file)
	q.Set("format", "tar")
	_, body, err := p.api.stream("files-archive", params, q, nil)
	if err != nil {
		p.fail(err)
		return
	}
	defer body.Close()
	tr := tar.NewReader(body)
	for {
		h, err := tr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = &apiError{Status: http.StatusNotFound, Class: api.NotFound, Detail: file + " is not a regular file: download a folder as an archive"}
			}
			p.fail(err)
			return
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p.w.Header().Set("Content-Type", "application/octet-stream")
		p.w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(file)}))
		p.w.Header().Set("Content-Length", itoa(h.Size))
		if _, err := io.Copy(p.w, tr); err != nil {
			// Halfway: end the answer so the browser cannot take a
			// truncated file for the whole one.
			panic(http.ErrAbortHandler)
		}
		_, _ = io.Copy(io.Discard, body) // the archive's end, so the API ends as it should
		return
	}
}

// archive sends a folder (or files) as the API's zip or tar archive.
func (p *page) archive() {
	params, q := p.filesParams()
	q.Set("path", cleanPath(p.r.URL.Query().Get("path")))
	format := p.r.URL.Query().Get("format")
	if format != "tar" {
		format = "zip"
	}
	q.Set("format", format)
	h, body, err := p.api.stream("files-archive", params, q, nil)
	if err != nil {
		p.fail(err)
		return
	}
	defer body.Close()
	for _, k := range []string{"Content-Type", "Content-Disposition"} {
		p.w.Header().Set(k, h.Get(k))
	}
	if _, err := io.Copy(p.w, body); err != nil {
		panic(http.ErrAbortHandler)
	}
}

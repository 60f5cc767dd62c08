package console

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/coffer-backup/coffer/internal/console/format"
)

//go:embed templates/*.html
var templateFiles embed.FS

// templates are the console's pages: each page file parsed with the
// layout and the shared partials into a set of its own (every page
// defines "content"), and the placeholder apart.
type templates struct {
	sets map[string]*template.Template
}

// parseTemplates parses the embedded templates; a template that does not
// parse is a bug caught by every test, so it panics.
func parseTemplates() *templates {
	t := &templates{sets: map[string]*template.Template{}}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, f := range names {
		name := strings.TrimSuffix(path.Base(f), ".html")
		switch name {
		case "layout", "partials":
			continue
		}
		files := []string{"templates/partials.html", f}
		if name != "placeholder" {
			files = append([]string{"templates/layout.html"}, files...)
		}
		t.sets[name] = template.Must(template.New(name).Funcs(format.Funcs).ParseFS(templateFiles, files...))
	}
	return t
}

// render writes a page (its "layout", or the file's own first template
// for pages without one) or one of its fragments: "page/fragment".
func (t *templates) render(w io.Writer, name string, data any) error {
	set, frag, _ := strings.Cut(name, "/")
	s, ok := t.sets[set]
	if !ok {
		return fmt.Errorf("console: no template %s", set)
	}
	switch {
	case frag != "":
		return s.ExecuteTemplate(w, frag, data)
	case s.Lookup("layout") != nil:
		return s.ExecuteTemplate(w, "layout", data)
	}
	return s.ExecuteTemplate(w, set+".html", data)
}

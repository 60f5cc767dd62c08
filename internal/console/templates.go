package console

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
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
		t.sets[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFiles, files...))
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

var funcs = template.FuncMap{
	"bytes":       config.HumanBytes,
	"ago":         ago,
	"dur":         duration,
	"when":        when,
	"pct":         percent,
	"share":       shareOf,
	"signed":      signedShare,
	"add":         func(a, b int) int { return a + b },
	"esc":         url.PathEscape,
	"short":       func(s string) string { return s[:min(len(s), 8)] },
	"join":        strings.Join,
	"split":       strings.Fields,
	"dirname":     func(p string) string { return path.Dir(p) },
	"status":      statusClass,
	"rate":        func(f float64) string { return config.HumanBytes(int64(f)) + "/s" },
	"size":        func(f float64) string { return config.HumanBytes(int64(f)) },
	"consistency": api.Consistency,
}

// ago says how long ago t was, in the largest unit that fits.
func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return duration(time.Since(t).Seconds()) + " ago"
}

// duration says a number of seconds briefly: 45s, 3m 12s, 2h 5m, 3d 4h.
func duration(s float64) string {
	if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return "—"
	}
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	switch {
	case s > 0 && d == 0:
		return "under 1s" // not "0s": something took time
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", int(d.Hours())/24)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// when is a time as operators read it: local date and time to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func percent(done, total int64) int {
	if total <= 0 {
		return 0
	}
	return int(math.Min(100, float64(done)*100/float64(total)))
}

// statusClass is the CSS class of a job's status.
func statusClass(s string) string {
	switch s {
	case "success":
		return "ok"
	case "failed":
		return "bad"
	case "partial", "cancelled":
		return "warn"
	}
	return "busy"
}

// signedShare writes a signed fraction as a whole percentage with its
// sign (+12%, -3%): a run's error against its prediction.
func signedShare(f float64) string {
	if math.Round(f*100) == 0 {
		return "0%"
	}
	return fmt.Sprintf("%+.0f%%", f*100)
}

// shareOf writes a fraction (0 to 1) as a whole percentage.
func shareOf(f float64) string { return strconv.FormatFloat(f*100, 'f', 0, 64) + "%" }

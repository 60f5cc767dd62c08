package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// documentDirs hold every type coffer prints with --json or answers with
// through the API: this package, and the version document.
var documentDirs = []string{".", filepath.Join("..", "version")}

// jsonFieldLines are the documents' fields as "Type field" lines, read
// from the source: the JSON name of every exported struct field, and
// "Type +Embedded" for an embedded struct whose fields its document
// carries.
func jsonFieldLines(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range documentDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return true
				}
				out = append(out, structFields(f.Name.Name+"."+ts.Name.Name, st)...)
				return true
			})
		}
	}
	sort.Strings(out)
	return out
}

func structFields(typ string, st *ast.StructType) []string {
	var out []string
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s).Get("json")
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if len(f.Names) == 0 { // embedded
			if name == "" {
				out = append(out, typ+" +"+strings.TrimPrefix(exprName(f.Type), "*"))
			} else {
				out = append(out, typ+" "+name)
			}
			continue
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			if name != "" {
				out = append(out, typ+" "+name)
			} else {
				out = append(out, typ+" "+n.Name)
			}
		}
	}
	return out
}

func exprName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return "*" + exprName(x.X)
	case *ast.SelectorExpr:
		return exprName(x.X) + "." + x.Sel.Name
	}
	return "?"
}

// TestJSONFieldsKeepTheLastReleases holds docs/compatibility.md's
// promise on the --json and API documents: every field name the last
// release's documents had (release/<tag>/json-fields.txt, frozen at the
// release) is still there. Fields may be added; removing or renaming one
// fails. COFFER_UPDATE_RELEASE=1 writes this build's list there (the
// release step, docs/upgrading.md).
func TestJSONFieldsKeepTheLastReleases(t *testing.T) {
	prev, err := os.ReadFile(filepath.Join("..", "..", "release", "previous"))
	if err != nil {
		t.Fatal(err)
	}
	tag := strings.Fields(string(prev))[0]
	path := filepath.Join("..", "..", "release", tag, "json-fields.txt")
	now := jsonFieldLines(t)
	if len(now) < 100 {
		t.Fatalf("only %d document fields found: the walk misses the documents", len(now))
	}
	if os.Getenv("COFFER_UPDATE_RELEASE") != "" {
		if err := os.WriteFile(path, []byte(strings.Join(now, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the last release's document fields: %v", err)
	}
	have := map[string]bool{}
	for _, l := range now {
		have[l] = true
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !have[l] {
			t.Errorf("document field %q of %s is gone or renamed: scripts and API clients read it (docs/compatibility.md); "+
				"add the new name beside the old one instead", l, tag)
		}
	}
}

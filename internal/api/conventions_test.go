package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// mayBeAbsent lists the list fields a document leaves out when its source
// does not know them (see the package comment); every other list is always
// present, [] when empty.
var mayBeAbsent = map[string]bool{
	"BackupPoint.Disks":              true, // the catalog records the count only
	"BackupPoint.Warnings":           true,
	"Job.Tasks":                      true, // listings leave them out
	"Job.Events":                     true,
	"PolicyReport.Selected":          true, // offline: nothing was asked
	"BootVerification.ScreenshotPNG": true, // bytes (base64), absent when QEMU gave no screen
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestDocumentConventions reads every struct of the package and holds its
// JSON fields to the conventions of the package comment: snake_case names,
// byte counts named *_bytes, durations in seconds, no null lists, one
// name for a VM and none that confuses a backup point with a snapshot.
func TestDocumentConventions(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	structs := 0
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".go") || strings.HasSuffix(de.Name(), "_test.go") {
			continue
		}
		// The operations' inputs are parameters, not documents: their
		// fields are path, query and header parameters named as the
		// routes name them, and their Body fields are the documents.
		if strings.HasPrefix(de.Name(), "input") {
			continue
		}
		f, err := parser.ParseFile(fset, de.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			structs++
			for _, field := range st.Fields.List {
				checkField(t, ts.Name.Name, field)
			}
			return true
		})
	}
	if structs < 20 {
		t.Fatalf("found only %d document types: is the parser looking in the right place?", structs)
	}
}

func checkField(t *testing.T, typeName string, field *ast.Field) {
	t.Helper()
	for _, name := range field.Names {
		if !name.IsExported() {
			continue
		}
		where := typeName + "." + name.Name
		if field.Tag == nil {
			t.Errorf("%s has no json tag", where)
			continue
		}
		raw, _ := strconv.Unquote(field.Tag.Value)
		tag := reflect.StructTag(raw).Get("json")
		jsonName, opts, _ := strings.Cut(tag, ",")
		if jsonName == "-" {
			continue // not part of the document (a header's value, say)
		}
		if !snakeCase.MatchString(jsonName) {
			t.Errorf("%s: json name %q is not snake_case", where, jsonName)
		}
		typ := exprString(field.Type)
		switch {
		case strings.HasPrefix(jsonName, "bytes") || strings.Contains(jsonName, "_bytes_") && !strings.HasSuffix(jsonName, "_per_second"):
			t.Errorf("%s: %q: byte counts are named *_bytes", where, jsonName)
		case strings.Contains(strings.ToLower(name.Name), "bytes") && !strings.HasSuffix(jsonName, "_bytes") && !strings.HasSuffix(jsonName, "_bytes_per_second"):
			t.Errorf("%s: %q: byte counts are named *_bytes", where, jsonName)
		case typ == "time.Duration":
			t.Errorf("%s: durations are float seconds in *_seconds fields, not time.Duration", where)
		case strings.Contains(jsonName, "seconds") && typ != "float64":
			t.Errorf("%s: %q is %s, want float64 seconds", where, jsonName, typ)
		case jsonName == "vm_name" || jsonName == "snapshot" || jsonName == "snapshot_id" || jsonName == "backup_point":
			t.Errorf("%s: %q: a VM is \"vm\", a backup point \"point_id\"", where, jsonName)
		}
		if strings.HasPrefix(typ, "[]") && strings.Contains(opts, "omit") && !mayBeAbsent[where] {
			t.Errorf("%s: lists are [] when empty, not left out (or add it to mayBeAbsent with the reason)", where)
		}
	}
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.ArrayType:
		return "[]" + exprString(x.Elt)
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	case *ast.MapType:
		return "map[" + exprString(x.Key) + "]" + exprString(x.Value)
	}
	return "?"
}

package auth

import (
	"errors"
	"testing"
)

func TestParsePath(t *testing.T) {
	for in, want := range map[string]string{
		"/":                           "/",
		"/system":                     "/system",
		"/access/":                    "/access",
		"/repositories":               "/repositories",
		"/repositories/main":          "/repositories/main",
		"/repositories/my repo":       "/repositories/my%20repo",
		"/repositories/my%20repo":     "/repositories/my%20repo",
		"/repositories/100%":          "/repositories/100%25",
		"/connections/vc1/vm/vm-42":   "/connections/vc1/vm/vm-42",
		"/connections/vc1/vm/a%2Fb":   "/connections/vc1/vm/a%2Fb",
		"/connections/vc1/vm/Ünïcode": "/connections/vc1/vm/%C3%9Cn%C3%AFcode",
		"/policies/nightly":           "/policies/nightly",
		"/media":                      "/media",
		"/media/vtl1":                 "/media/vtl1",
	} {
		got, err := ParsePath(in)
		if err != nil || got != want {
			t.Errorf("ParsePath(%q) = %q, %v; want %q", in, got, err, want)
		}
		// Canonical paths are fixed points.
		if again, err := ParsePath(got); err != nil || again != got {
			t.Errorf("ParsePath(%q) = %q, %v: not canonical", got, again, err)
		}
		// And the privileges code reads them.
		if _, err := splitPath(got); err != nil {
			t.Errorf("splitPath(%q): %v", got, err)
		}
	}
	for _, in := range []string{"", "system", "//", "/system//", "/repositories//x", "/repositories/..",
		"/repositories/a/b", "/connections/c/vms/x", "/connections/c/vm", "/policies/p/q", "/media/l/CFR001L8", "/other",
		"/repositories/\x01", "/repositories/%00"} {
		if got, err := ParsePath(in); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParsePath(%q) = %q, %v; want an invalid-path error", in, got, err)
		}
	}
}

// The builders escape what would break the tree, and ParsePath agrees
// with them.
func TestPathBuilders(t *testing.T) {
	for _, name := range []string{"web", "a/b", "50%", "x y", "vm-1.example.com", "..", "ä"} {
		for _, p := range []string{RepositoryPath(name), ConnectionPath(name), VMPath("c", name), PolicyPath(name), MediaLibraryPath(name)} {
			got, err := ParsePath(p)
			if name == ".." {
				// Escaping leaves ".." as it is; it names nothing.
				if err == nil {
					t.Errorf("ParsePath(%q) accepted", p)
				}
				continue
			}
			if err != nil || got != p {
				t.Errorf("ParsePath(%q) = %q, %v", p, got, err)
			}
		}
	}
	if p := PointPaths("r", "c", "v"); len(p) != 2 || p[0] != "/repositories/r" || p[1] != "/connections/c/vm/v" {
		t.Errorf("PointPaths = %v", p)
	}
}

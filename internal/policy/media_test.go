package policy

import (
	"strings"
	"testing"
)

// TestMediaLibraries: the media-libraries section is decoded and checked
// with messages naming the library and the key; edits put and delete
// libraries like the other objects.
func TestMediaLibraries(t *testing.T) {
	c, err := load(t, "media-libraries:\n  - {name: vtl1, kind: vtl, directory: /srv/vtl}\n")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := c.MediaLibrary("vtl1"); !ok || l.Kind != "vtl" || l.Directory != "/srv/vtl" {
		t.Fatalf("vtl1: %+v %v", l, ok)
	}
	for doc, want := range map[string]string{
		"media-libraries: [{name: a, directory: /x}]":                         "media library a: kind is missing (vtl)",
		"media-libraries: [{name: a, kind: mtx}]":                             `media library a: kind: "mtx" is not one of vtl (a changer driven through mtx`,
		"media-libraries: [{name: a, kind: vtl}]":                             "media library a: directory is missing",
		"media-libraries: [{name: a, kind: vtl, directory: vtl}]":             `media library a: directory "vtl" is not an absolute path`,
		"media-libraries: [{name: a, kind: vtl, directory: /x}, {name: a}]":   "media library a is defined twice",
		"media-libraries: [{kind: vtl, directory: /x}]":                       "media library #1: name is missing",
		"media-libraries: [{name: a, kind: vtl, directory: /x, drives: [0]}]": `unknown key "drives" in media-libraries[0]`,
	} {
		if _, err := load(t, doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant %s", doc, err, want)
		}
	}

	n, err := c.PutMediaLibrary(MediaLibrary{Name: "vtl2", Kind: "vtl", Directory: "/srv/vtl2"})
	if err != nil || len(n.MediaLibraries) != 2 || len(c.MediaLibraries) != 1 {
		t.Fatalf("put a library: %+v %v", n.MediaLibraries, err)
	}
	if _, err := c.PutMediaLibrary(MediaLibrary{Name: "bad", Kind: "vtl"}); err == nil || !strings.Contains(err.Error(), "media library bad: directory is missing") {
		t.Fatalf("an invalid library: %v", err)
	}
	if n, err = n.DeleteMediaLibrary("vtl1"); err != nil || len(n.MediaLibraries) != 1 || n.MediaLibraries[0].Name != "vtl2" {
		t.Fatalf("delete a library: %+v %v", n, err)
	}
	if _, err := c.DeleteMediaLibrary("nope"); err == nil || !strings.Contains(err.Error(), `no media library is named "nope"`) {
		t.Fatalf("delete a missing library: %v", err)
	}
}

package console_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleMediaLibrariesConfigured: a virtual tape library added on
// the Media page is stored through the API and listed at once with its
// drives and slots; the same name again is refused as existing, and a key
// the file's libraries do not have is refused with the API's reason, each
// under the form, whose text stays as typed. It is changed in place at
// the version read, then deleted.
func TestConsoleMediaLibrariesConfigured(t *testing.T) {
	l := newLab(t)
	tapes := filepath.Join(l.dir, "vtl")
	l.coffer("init")
	l.coffer("media", "vtl", "create", tapes, "--drives", "1", "--slots", "2", "--capacity", "32MiB")
	l.coffer("media", "vtl", "add", tapes, "CFR001L8", "--slot", "1")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/media")
	c.waitText("#no-libraries", "No media library is configured")
	c.run(chromedp.Click("#media-library-form summary"))
	add := func(spec string) {
		c.run(chromedp.SetValue("#media-library-spec", spec), chromedp.Click("#save-media-library"))
	}
	add("name: tapes\nkind: vtl\ndirectory: " + tapes + "\n")
	c.waitText("#media-library-result", "The media-library tapes is added")
	add("name: tapes\nkind: vtl\ndirectory: " + tapes + "\n")
	c.waitText("#media-library-result", "media-library tapes exists already")
	bad := "name: typo\nkind: vtl\ndirectory: " + tapes + "\ndrive-limt: 1\n"
	add(bad)
	c.waitText("#media-library-result", "drive-limt")
	var kept string
	c.run(chromedp.Value("#media-library-spec", &kept))
	if kept != bad {
		t.Fatalf("the form's text after a refusal is %q, want %q as typed", kept, bad)
	}
	token := l.adminToken()
	var lib struct {
		Source  string         `json:"source"`
		Version int64          `json:"version"`
		Spec    map[string]any `json:"spec"`
	}
	if code := l.get(token, "/api/v1/media/libraries/tapes", &lib); code != 200 || lib.Source != "catalog" || lib.Spec["directory"] != tapes {
		t.Fatalf("the stored library (%d): %+v", code, lib)
	}
	if code := l.get(token, "/api/v1/media/libraries/typo", nil); code != 404 {
		t.Fatalf("the refused library is stored: %d", code)
	}

	// Listed with its drives and slots as soon as it is added.
	c.open("/ui/media")
	c.waitText("#slots-tapes", "CFR001L8")
	c.waitText("#media-library-catalog-tapes", "directory: "+tapes)
	c.shot("media-libraries")

	// Changed in place, at the version the form was read at.
	read := lib.Version
	c.follow("#edit-media-library-tapes")
	c.waitText("#media-library-form summary", "Change media-library tapes")
	c.run(chromedp.SetValue("#media-library-spec", "kind: vtl\ndirectory: "+tapes+"\ndrive-limit: 1\n"), chromedp.Click("#save-media-library"))
	c.waitText("#media-library-result", "The media-library tapes is changed")
	lib.Spec = nil
	if code := l.get(token, "/api/v1/media/libraries/tapes", &lib); code != 200 || lib.Version <= read || fmt.Sprint(lib.Spec["drive-limit"]) != "1" {
		t.Fatalf("the changed library (%d): %+v", code, lib)
	}
	c.open("/ui/media")
	c.waitText("#media-library-catalog-tapes", "drive-limit: 1")
	c.run(chromedp.Click("#delete-media-library-tapes"))
	c.waitText("#media-library-changes", "The media-library tapes is deleted")
	if code := l.get(token, "/api/v1/media/libraries/tapes", nil); code != 404 {
		t.Fatalf("the library after its delete: %d", code)
	}
}

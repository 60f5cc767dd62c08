package console_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleRepositoriesConfigured: a repository added on the
// Repositories page is stored through the API; the same name again is
// refused as existing, and a key the file's repositories do not have is
// refused with the API's reason, each under the form, whose text stays
// as typed. Once its storage is made (coffer init --repo), the page
// lists it with its points, opened with the server's password. It is
// changed in place at the version read, then deleted.
func TestConsoleRepositoriesConfigured(t *testing.T) {
	l := newLab(t)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	spare := filepath.Join(l.dir, "spare")
	c.open("/ui/repositories")
	c.run(chromedp.Click("#repository-form summary"))
	add := func(spec string) {
		c.run(chromedp.SetValue("#repository-spec", spec), chromedp.Click("#save-repository"))
	}
	add("name: spare\nlocation: " + spare + "\n")
	c.waitText("#repository-result", "The repository spare is added")
	add("name: spare\nlocation: " + spare + "-2\n")
	c.waitText("#repository-result", "repository spare exists already")
	bad := "name: typo\nlocaton: " + spare + "\n"
	add(bad)
	c.waitText("#repository-result", "locaton")
	var kept string
	c.run(chromedp.Value("#repository-spec", &kept))
	if kept != bad {
		t.Fatalf("the form's text after a refusal is %q, want %q as typed", kept, bad)
	}
	token := l.adminToken()
	var repo struct {
		Source  string         `json:"source"`
		Version int64          `json:"version"`
		Spec    map[string]any `json:"spec"`
	}
	if code := l.get(token, "/api/v1/repositories/spare", &repo); code != 200 || repo.Source != "catalog" || repo.Spec["location"] != spare {
		t.Fatalf("the stored repository (%d): %+v", code, repo)
	}
	if code := l.get(token, "/api/v1/repositories/typo", nil); code != 404 {
		t.Fatalf("the refused repository is stored: %d", code)
	}

	// Its storage made on the server's host, the page opens it.
	l.coffer("init", "--repo", spare)
	c.open("/ui/repositories")
	c.waitText("#spare", "Points")
	c.waitText("#repository-catalog-spare", "location: "+spare)
	c.shot("repositories-config")

	// Changed in place, at the version the form was read at.
	read := repo.Version
	c.follow("#edit-repository-spare")
	c.waitText("#repository-form summary", "Change repository spare")
	c.run(chromedp.SetValue("#repository-spec", "location: "+spare+"\nstreams: 2\n"), chromedp.Click("#save-repository"))
	c.waitText("#repository-result", "The repository spare is changed")
	repo.Spec = nil
	if code := l.get(token, "/api/v1/repositories/spare", &repo); code != 200 || repo.Version <= read || fmt.Sprint(repo.Spec["streams"]) != "2" {
		t.Fatalf("the changed repository (%d): %+v", code, repo)
	}
	c.open("/ui/repositories")
	c.waitText("#repository-catalog-spare", "streams: 2")
	c.run(chromedp.Click("#delete-repository-spare"))
	c.waitText("#repository-changes", "The repository spare is deleted")
	if code := l.get(token, "/api/v1/repositories/spare", nil); code != 404 {
		t.Fatalf("the repository after its delete: %d", code)
	}
}

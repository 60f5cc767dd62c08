package console_test

import (
	"fmt"

	"github.com/chromedp/chromedp"
)

// configTrip is one kind's way through the console's configuration
// editor (page_config.go), which every page that edits configuration
// objects shares: an object added in the form, refusals shown under it
// with its text kept as typed, the object changed in place at the
// version read, then deleted; after each step the API says the same.
type configTrip struct {
	Kind, Page string // "connection", "/ui/connections"
	API        string // the object's path below /api/v1
	Name, Spec string // the object added
	// Refused are specs the API refuses, each with what its refusal
	// says; none of them may be stored.
	Refused []refusal
	// Stored is a key of the stored spec and its value once added, and
	// Changed after Change.
	Stored  [2]string
	Change  string
	Changed [2]string
	// Added runs once the object is added and the page read again (it
	// checks what the object does; a screenshot).
	Added func()
}

type refusal struct{ Spec, Says, Refused string }

// trip goes through the editor with k.
func (c *chrome) trip(k configTrip) {
	t := c.t
	t.Helper()
	form, spec, result := "#"+k.Kind+"-form", "#"+k.Kind+"-spec", "#"+k.Kind+"-result"
	add := func(text string) { c.run(chromedp.SetValue(spec, text), chromedp.Click("#save-"+k.Kind)) }
	c.open(k.Page)
	c.run(chromedp.Click(form + " summary"))
	add(k.Spec)
	c.waitText(result, "The "+k.Kind+" "+k.Name+" is added")
	for _, r := range k.Refused {
		add(r.Spec)
		c.waitText(result, r.Says)
		var kept string
		c.run(chromedp.Value(spec, &kept))
		if kept != r.Spec {
			t.Fatalf("the form's text after a refusal is %q, want %q as typed", kept, r.Spec)
		}
	}
	token := c.l.adminToken()
	var o struct {
		Source  string         `json:"source"`
		Version int64          `json:"version"`
		Spec    map[string]any `json:"spec"`
	}
	if code := c.l.get(token, k.API+k.Name, &o); code != 200 || o.Source != "catalog" || fmt.Sprint(o.Spec[k.Stored[0]]) != k.Stored[1] {
		t.Fatalf("the stored %s (%d): %+v", k.Kind, code, o)
	}
	for _, r := range k.Refused {
		if r.Refused == "" {
			continue
		}
		if code := c.l.get(token, k.API+r.Refused, nil); code != 404 {
			t.Fatalf("the refused %s %s is stored: %d", k.Kind, r.Refused, code)
		}
	}
	c.open(k.Page)
	row := "#" + k.Kind + "-catalog-" + k.Name
	c.waitText(row, "name: "+k.Name)
	if k.Added != nil {
		k.Added()
	}

	// Changed in place, at the version the form was read at.
	read := o.Version
	c.follow("#edit-" + k.Kind + "-" + k.Name)
	c.waitText(form+" summary", "Change "+k.Kind+" "+k.Name)
	c.run(chromedp.SetValue(spec, k.Change), chromedp.Click("#save-"+k.Kind))
	c.waitText(result, "The "+k.Kind+" "+k.Name+" is changed")
	o.Spec = nil
	if code := c.l.get(token, k.API+k.Name, &o); code != 200 || o.Version <= read || fmt.Sprint(o.Spec[k.Changed[0]]) != k.Changed[1] {
		t.Fatalf("the changed %s (%d): %+v", k.Kind, code, o)
	}
	c.open(k.Page)
	c.waitText(row, k.Changed[0]+":")
	c.run(chromedp.Click("#delete-" + k.Kind + "-" + k.Name))
	c.waitText("#"+k.Kind+"-changes", "The "+k.Kind+" "+k.Name+" is deleted")
	if code := c.l.get(token, k.API+k.Name, nil); code != 404 {
		t.Fatalf("the %s after its delete: %d", k.Kind, code)
	}
}

// exists is the refusal of a name taken already.
func exists(kind, name, spec string) refusal {
	return refusal{Spec: spec, Says: kind + " " + name + " exists already"}
}

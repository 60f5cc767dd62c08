package console_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsolePolicyDelete: a policy the API made is deleted from its
// page, which then leaves for the list without it; one deleted meanwhile
// is refused with the API's reason on its page; the configuration file's
// policy offers no Delete.
func TestConsolePolicyDelete(t *testing.T) {
	l := newLab(t)
	l.config(`
connections:
  - {name: sim, kind: fake, options: {vms: 2}}
policies:
  - {name: filed, connection: sim, select: {names: ["*"]}}
`)
	l.coffer("init")
	for _, name := range []string{"web", "gone"} {
		spec := filepath.Join(l.dir, name+".yaml")
		if err := os.WriteFile(spec, []byte("name: "+name+"\nconnection: sim\nselect: {names: [\"*\"]}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		l.coffer("config", "create", "policy", "-f", spec)
	}
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/policies/filed")
	c.text("#run-now")
	if n := c.count("#delete-policy"); n != 0 {
		t.Fatal("the configuration file's policy offers a Delete")
	}
	// Deleted by someone else while its page is open: refused there.
	c.open("/ui/policies/gone")
	c.text("#delete-policy")
	l.coffer("config", "delete", "policy", "gone")
	c.run(chromedp.Click("#delete-policy"))
	c.waitText("#run-result", `no policy named "gone" was created through the API`)

	c.open("/ui/policies/web")
	c.shot("policy-delete")
	c.clickAway("#delete-policy")
	c.waitText("main", "filed")
	if loc := c.location(); loc != l.srv.url+"/ui/policies" {
		t.Fatalf("after the delete the browser is at %s", loc)
	}
	if n := c.count(`a[href="/ui/policies/web"]`); n != 0 {
		t.Fatal("the deleted policy is still listed")
	}
	token := l.adminToken()
	if code := l.get(token, "/api/v1/policies/web", nil); code != 404 {
		t.Fatalf("the policy after its delete: %d", code)
	}
	if code := l.get(token, "/api/v1/policies/filed", nil); code != 200 {
		t.Fatalf("the file's policy: %d", code)
	}
}

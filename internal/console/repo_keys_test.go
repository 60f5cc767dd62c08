package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestConsoleKeysAndRepair: on the Repositories page a password added as
// a key is listed by the API and then removed again, the key the server
// opens the repository with offers no Remove, and a repair shows its
// plan before it changes anything; the repository verifies afterwards.
func TestConsoleKeysAndRepair(t *testing.T) {
	l := newLab(t)
	img := l.ext4Image("disk", map[string][]byte{"etc/motd": []byte("keys and repair\n")})
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "files")
	l.start()
	c := l.chrome()
	c.firstRun()
	admin := l.adminToken()
	keys := func() []api.Key {
		var ks []api.Key
		if code := l.get(admin, "/api/v1/repositories/default/keys", &ks); code != 200 {
			t.Fatalf("keys: %d", code)
		}
		return ks
	}
	if ks := keys(); len(ks) != 1 || !ks[0].Current {
		t.Fatalf("a new repository's keys: %+v", ks)
	}

	c.open("/ui/repositories")
	if n := c.count("#keys-default .remove-key"); n != 0 {
		t.Errorf("the server's own key offers Remove (%d buttons)", n)
	}
	c.run(chromedp.Click("#add-key-default summary"), chromedp.SendKeys("#key-label-default", "the DR site"),
		chromedp.SendKeys("#key-password-default", "a second pass phrase"), chromedp.SendKeys("#key-again-default", "a second pass phrase"),
		chromedp.Click("#add-key-submit-default"))
	c.waitText("#key-result-default", "is added")
	ks := keys()
	if len(ks) != 2 {
		t.Fatalf("after the console added a key, the API lists %d", len(ks))
	}
	c.open("/ui/repositories")
	c.waitText("#keys-default", "the DR site")
	c.run(chromedp.Click("#keys-default .remove-key"))
	c.waitText("#key-result-default", "is removed")
	if ks := keys(); len(ks) != 1 || !ks[0].Current {
		t.Errorf("after the console removed the added key, the API lists %+v", ks)
	}

	c.open("/ui/repositories")
	c.run(chromedp.Click("#repair-default summary"), chromedp.SetValue("#repair-what-default", "index"), chromedp.Click("#repair-plan-default"))
	c.waitText("#repair-report", "A repair of index would")
	c.shot("repair")
	if c.count("#repair-apply-default") > 0 {
		c.run(chromedp.Click("#repair-apply-default"))
		c.waitText("#repair-report", "The repair of index is done")
	}
	if !strings.Contains(c.text("#repair-report"), "kept readable") {
		t.Errorf("the repair's report: %s", c.text("#repair-report"))
	}
	if out := l.coffer("verify", "--read-data"); !strings.Contains(out, "no problems found") {
		t.Errorf("verify after the console's repair:\n%s", out)
	}
}

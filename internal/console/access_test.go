package console_test

import (
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestConsoleAccessUsersAndGrants: a user added in the console is granted
// a role, the grant is removed, and the user is disabled, enabled and
// deleted, each through its own button; after each step the API says the
// same as the page.
func TestConsoleAccessUsersAndGrants(t *testing.T) {
	l := newLab(t)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()
	admin := l.adminToken()
	bob := func() (u api.User, found bool) {
		var users []api.User
		if code := l.get(admin, "/api/v1/access/users", &users); code != 200 {
			t.Fatalf("users: %d", code)
		}
		i := slices.IndexFunc(users, func(u api.User) bool { return u.Name == "bob" })
		if i < 0 {
			return api.User{}, false
		}
		return users[i], true
	}
	bobsGrants := func() int {
		var acl []api.ACLEntry
		if code := l.get(admin, "/api/v1/access/acl", &acl); code != 200 {
			t.Fatalf("acl: %d", code)
		}
		n := 0
		for _, e := range acl {
			if e.User == "bob" {
				n++
			}
		}
		return n
	}

	c.open("/ui/access")
	c.run(chromedp.Click("#add-user summary"), chromedp.SendKeys("#new-user", "bob"), chromedp.Click("#create-user"))
	c.waitText("#user-result", "bob is added")
	c.open("/ui/access")
	c.run(chromedp.Click("#grant-role summary"), chromedp.SendKeys("#acl-user", "bob"), chromedp.SetValue("#acl-role", "Auditor"),
		chromedp.Click("#grant"))
	c.waitText("#acl-result", "bob holds Auditor on /")
	if n := bobsGrants(); n != 1 {
		t.Fatalf("bob holds %d grants after the console's grant, want 1", n)
	}

	c.open("/ui/access")
	c.run(chromedp.Click(`//table[@id="acl"]//tr[td[contains(., "bob")]]//button[contains(@class, "remove-grant")]`, chromedp.BySearch))
	c.waitText("#acl-result", "bob no longer holds Auditor on /")
	if n := bobsGrants(); n != 0 {
		t.Errorf("bob holds %d grants after the console removed his, want 0", n)
	}

	c.run(chromedp.Click("#user-bob .disable-user"))
	c.waitText("#user-result", "User bob is disabled")
	if u, ok := bob(); !ok || u.Enabled {
		t.Errorf("after the console's Disable, the API says bob is %+v (found %v)", u, ok)
	}
	c.open("/ui/access")
	c.run(chromedp.Click("#user-bob .enable-user"))
	c.waitText("#user-result", "User bob may sign in again")
	if u, ok := bob(); !ok || !u.Enabled {
		t.Errorf("after the console's Enable, the API says bob is %+v (found %v)", u, ok)
	}
	c.run(chromedp.Click("#user-bob .delete-user"))
	c.waitText("#user-result", "User bob is deleted")
	if u, ok := bob(); ok {
		t.Errorf("after the console's Delete, the API still lists bob: %+v", u)
	}
}

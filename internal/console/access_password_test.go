package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsolePasswords: the Access page gives a user a new one-time
// setup link, which then chooses their password and signs them in; and
// the caller changes their own password with the old one: a wrong old
// one and a repetition that differs are refused under the form, the
// change is made, and the new password signs in.
func TestConsolePasswords(t *testing.T) {
	l := newLab(t)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/access")
	c.run(chromedp.Click("#add-user summary"), chromedp.SendKeys("#new-user", "bob"), chromedp.Click("#create-user"))
	c.waitText("#user-result", "bob is added")
	var first, second string
	c.run(chromedp.Value("#setup-link", &first))
	c.open("/ui/access")
	c.run(chromedp.Click("#user-bob .setup-link"))
	c.waitText("#user-result", "A new one-time link for bob")
	c.run(chromedp.Value("#new-setup-link", &second))
	if !strings.Contains(second, "/ui/setup#coffersetup_") || second == first {
		t.Fatalf("the new setup link is %q (the first was %q)", second, first)
	}

	// The caller's own password: refused twice, then changed.
	const newPassword = "another long pass phrase of the admin"
	change := func(old, again string) {
		c.run(chromedp.SetValue("#pw-old", old), chromedp.SetValue("#pw-new", newPassword), chromedp.SetValue("#pw-again", again),
			chromedp.Click("#change-password-submit"))
	}
	c.run(chromedp.Click("#change-password summary"))
	change("not the password", newPassword)
	c.waitText("#password-result", "Failed: the current password is wrong")
	if strings.Contains(c.text("#password-result"), "privilege") {
		t.Fatal("a wrong old password is shown as a missing privilege")
	}
	change(adminPassword, newPassword+"!")
	c.waitText("#password-result", "differ")
	change(adminPassword, newPassword)
	c.waitText("#password-result", "Your password is changed.")
	c.shot("access-passwords")
	c.clickAway("#signout")
	c.signIn("admin", newPassword)

	// The new link chooses bob's password and signs him in.
	c.run(chromedp.Navigate(second), chromedp.WaitVisible("#new-password"))
	c.run(chromedp.SendKeys("#new-password", "bob's long pass phrase"), chromedp.SendKeys("#again", "bob's long pass phrase"),
		chromedp.Click("#setup-submit"), chromedp.WaitVisible("#who"))
	if got := c.text("#who"); got != "bob" {
		t.Fatalf("the new setup link signed in %q, want bob", got)
	}
}

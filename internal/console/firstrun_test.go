package console_test

import "github.com/chromedp/chromedp"

// firstRun chooses the administrator's password through the setup link
// the server printed at its first start, which signs the administrator in.
func (c *chrome) firstRun() {
	c.t.Helper()
	if c.l.srv.setupToken == "" {
		c.t.Fatalf("the first start printed no setup link:\n%s", c.l.srv.log())
	}
	c.open("/ui/setup#" + c.l.srv.setupToken)
	c.run(chromedp.SendKeys("#new-password", adminPassword), chromedp.SendKeys("#again", adminPassword),
		chromedp.Click("#setup-submit"), chromedp.WaitVisible("#who"))
	if got := c.text("#who"); got != "admin" {
		c.t.Fatalf("the setup link signed in %q, want admin", got)
	}
}

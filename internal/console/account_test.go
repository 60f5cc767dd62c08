package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"
)

// accountLab is an installation whose server keeps the default
// server.require-second-factor (Admin and RepositoryAdmin), with the
// administrator's password chosen through the setup link.
func accountLab(t *testing.T) (*lab, *chrome) {
	l := newLab(t)
	l.config("server:\n  drain-timeout: 1m\n") // a server section without require-second-factor: the default
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.open("/ui/setup#" + l.srv.setupToken)
	c.run(chromedp.SendKeys("#new-password", adminPassword), chromedp.SendKeys("#again", adminPassword))
	c.clickAway("#setup-submit")
	return l, c
}

// TestAccountTOTP: an administrator without a second factor is sent from
// the setup link to the Account page and can reach no other page; the
// authenticator app is set up with its QR code (the code typed is
// computed here from the key shown), the recovery codes are shown once,
// and the next sign-in asks for a code, where a wrong one is refused and
// a recovery code works. Each page is checked by axe and photographed.
func TestAccountTOTP(t *testing.T) {
	_, c := accountLab(t)
	c.run(chromedp.WaitVisible("#must-enrol"))
	if loc := c.location(); !strings.HasSuffix(loc, "/ui/account") {
		t.Fatalf("after the setup link: %s, want the Account page", loc)
	}
	c.open("/ui/tasks")
	if loc := c.location(); !strings.HasSuffix(loc, "/ui/account") || c.count(".sections") != 0 {
		t.Fatalf("another page before the enrolment went to %s (or the header offers its sections)", loc)
	}
	c.shot("account-enrol")

	c.clickAway("#totp-enrol")
	c.run(chromedp.WaitVisible("#totp-qr"))
	secret := c.text("#totp-secret")
	c.shot("account-totp")
	// The page comes again with the error: the same form, the same QR code.
	c.run(chromedp.SendKeys("#totp-code", "000000"), chromedp.Click("#totp-confirm-submit"), chromedp.WaitVisible("#account-error"),
		chromedp.WaitVisible("#totp-qr"))
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.run(chromedp.SendKeys("#totp-code", code))
	c.clickAway("#totp-confirm-submit")
	c.run(chromedp.WaitVisible("#recovery-codes"))
	if n := c.count("#recovery-codes li"); n != 10 {
		t.Fatalf("%d recovery codes shown", n)
	}
	recovery := c.text("#recovery-codes li code")
	c.shot("account-recovery-codes")
	c.clickAway("#codes-done")
	c.run(chromedp.WaitVisible("#who"), chromedp.WaitVisible(".sections"))

	// The next sign-in asks for the second step.
	c.clickAway("#signout")
	c.run(chromedp.SendKeys("#user", "admin"), chromedp.SendKeys("#password", adminPassword))
	c.clickAway("#signin")
	c.run(chromedp.WaitVisible("#second-step-form"))
	c.run(chromedp.SendKeys("#code", "123456"), chromedp.Click("#verify"), chromedp.WaitVisible("#second-step-error"))
	c.shot("login-second-factor")
	c.run(chromedp.SendKeys("#code", recovery))
	c.clickAway("#verify")
	c.run(chromedp.WaitVisible(".sections"))

	c.open("/ui/account")
	if got := c.text("#rc-left"); !strings.HasPrefix(got, "9 unused") {
		t.Fatalf("recovery codes left: %q", got)
	}
	c.shot("account")
}

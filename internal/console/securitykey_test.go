package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
)

// virtualKey is a security key of Chromium's WebAuthn virtual
// authenticator environment (DevTools protocol): a CTAP2 platform
// authenticator that verifies its user and answers at once.
func (c *chrome) virtualKey() webauthn.AuthenticatorID {
	c.t.Helper()
	var id webauthn.AuthenticatorID
	c.run(webauthn.Enable().WithEnableUI(false), chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		id, err = webauthn.AddVirtualAuthenticator(&webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Transport: webauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
		}).Do(ctx)
		return err
	}))
	return id
}

func (c *chrome) keyCredentials(id webauthn.AuthenticatorID) []*webauthn.Credential {
	c.t.Helper()
	var creds []*webauthn.Credential
	c.run(chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		creds, err = webauthn.GetCredentials(id).Do(ctx)
		return err
	}))
	return creds
}

// signInWithPassword signs out and in again with the password, up to the
// second step.
func (c *chrome) signInWithPassword() {
	c.t.Helper()
	c.clickAway("#signout")
	c.run(chromedp.SendKeys("#user", "admin"), chromedp.SendKeys("#password", adminPassword))
	c.clickAway("#signin")
}

// TestAccountSecurityKey: an administrator sent to enrol a second factor
// registers a security key (Chromium's virtual authenticator) on the
// Account page and gets recovery codes; the next sign-in asks for the
// key after the password and is let in by it. A key whose private key is
// not the one registered (the same credential ID, another key) is
// refused by the server, and once the key is removed from the account
// the next sign-in no longer takes it: the user is sent to enrol again.
// Each page is checked by axe.
func TestAccountSecurityKey(t *testing.T) {
	l := newLab(t)
	l.listen = "localhost:0"
	l.config("server:\n  drain-timeout: 1m\n")
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.open("/ui/setup#" + l.srv.setupToken)
	c.run(chromedp.SendKeys("#new-password", adminPassword), chromedp.SendKeys("#again", adminPassword))
	c.clickAway("#setup-submit")
	c.run(chromedp.WaitVisible("#must-enrol"))
	auth := c.virtualKey()

	c.run(chromedp.SendKeys("#key-name", "the blue key"), chromedp.Click("#key-add-submit"), chromedp.WaitVisible("#recovery-codes"))
	if got := c.text("#account-done"); !strings.Contains(got, "security key is added") {
		t.Fatalf("after the registration: %q", got)
	}
	if n := c.count("#recovery-codes li"); n != 10 {
		t.Fatalf("%d recovery codes shown with the first factor", n)
	}
	if n := c.count("#key-list li"); n != 1 || !strings.Contains(c.text("#key-list"), "the blue key") {
		t.Fatalf("%d keys listed: %q", n, c.text("#security-keys"))
	}
	creds := c.keyCredentials(auth)
	if len(creds) != 1 {
		t.Fatalf("the authenticator holds %d credentials", len(creds))
	}
	// The command line lists it (by its ID, base64url of the credential's).
	raw, err := base64.StdEncoding.DecodeString(creds[0].CredentialID)
	if err != nil {
		t.Fatal(err)
	}
	if out := l.coffer("account", "key", "list", "admin"); !strings.HasPrefix(out, base64.RawURLEncoding.EncodeToString(raw)+"  the blue key  added") {
		t.Fatalf("coffer account key list admin:\n%s", out)
	}
	c.shot("account-security-key")
	c.clickAway("#codes-done")
	c.run(chromedp.WaitVisible(".sections"))

	// The next sign-in: the password, then the key.
	c.signInWithPassword()
	c.run(chromedp.WaitVisible("#use-key"))
	c.shot("login-security-key")
	c.clickAway("#use-key")
	c.run(chromedp.WaitVisible(".sections"))

	// The same credential ID with another private key: the signature
	// does not verify against the public key registered.
	c.forgeKey(auth, *creds[0])
	c.signInWithPassword()
	c.run(chromedp.Click("#use-key"), chromedp.WaitVisible("#second-step-error"))
	if got := c.text("#second-step-error"); !strings.Contains(got, "security key is refused") {
		t.Fatalf("a wrong key: %q", got)
	}
	c.shot("login-security-key-refused")

	// The right key again (its signature count where it was), then its
	// removal: the next sign-in takes no key and sends the user to enrol.
	genuine := c.keyCredentials(auth)[0]
	genuine.PrivateKey = creds[0].PrivateKey
	c.run(webauthn.ClearCredentials(auth), webauthn.AddCredential(auth, genuine))
	c.clickAway("#use-key")
	c.run(chromedp.WaitVisible(".sections"))
	c.open("/ui/account")
	c.clickAway(".key-remove")
	c.run(chromedp.WaitVisible("#account-done"))
	if n := c.count("#key-list li"); n != 0 {
		t.Fatalf("%d keys listed after the removal", n)
	}
	c.signInWithPassword()
	c.run(chromedp.WaitVisible("#must-enrol"))
	if c.count("#use-key") != 0 {
		t.Fatal("the sign-in offers a removed key")
	}

	checkKeyAudit(t, l)
}

// checkKeyAudit: the audit log holds the registration, the second steps
// with the key (the refused one too) and the removal, in that order.
func checkKeyAudit(t *testing.T, l *lab) {
	t.Helper()
	var got []string
	for _, line := range strings.Split(l.coffer("audit", "--user", "admin", "--limit", "1000"), "\n") {
		for _, op := range []string{"register-security-key", "second-factor", "remove-security-key"} {
			if f := strings.Fields(line); len(f) > 6 && slices.Contains(f, op) {
				got = append(got, op+" "+f[slices.Index(f, op)+2])
			}
		}
	}
	slices.Reverse(got) // oldest first
	want := []string{"register-security-key ok", "second-factor ok", "second-factor denied", "second-factor ok", "remove-security-key ok"}
	if !slices.Equal(got, want) {
		t.Fatalf("the audit log of admin's key: %q, want %q", got, want)
	}
}

// forgeKey replaces the authenticator's credentials with cred under
// another private key: the same credential ID, a signature the server's
// public key does not verify.
func (c *chrome) forgeKey(auth webauthn.AuthenticatorID, forged webauthn.Credential) {
	c.t.Helper()
	wrong, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(wrong)
	if err != nil {
		c.t.Fatal(err)
	}
	forged.PrivateKey = base64.StdEncoding.EncodeToString(pkcs8)
	c.run(webauthn.ClearCredentials(auth), webauthn.AddCredential(auth, &forged))
}

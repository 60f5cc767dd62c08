package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestLoginThroughOIDCRealm: with an LDAP realm and an OpenID Connect
// realm configured, the sign-in page offers the realm choice and the
// OIDC realm's button (axe finds no serious violation); a click runs the
// code flow with PKCE against oauth2-proxy's mockoidc, a provider process
// of its own, and ends signed in as the provider's user, with the role
// its groups claim maps to.
func TestLoginThroughOIDCRealm(t *testing.T) {
	p := testutil.StartOIDCProvider(t)
	l := newLab(t)
	secret := filepath.Join(l.dir, "oidc-client.secret")
	if err := os.WriteFile(secret, []byte(p.ClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	// The LDAP realm is offered, never asked: nobody signs in through it.
	l.config(fmt.Sprintf(`realms:
  - name: corp
    type: ldap
    url: ldaps://127.0.0.1:9
    bind-dn: cn=coffer,ou=services,dc=corp,dc=example
    bind-password: unused
    user-base: ou=people,dc=corp,dc=example
    roles:
      - group: restorers
        role: RestoreOperator
  - name: sso
    type: oidc
    comment: Sign in with Example SSO
    issuer: %s
    client-id: %s
    client-secret-file: %s
    roles:
      - value: auditors
        role: Auditor
`, p.Issuer, p.ClientID, secret))
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.open("/ui/login")
	if got := c.text("#realm-sso"); got != "Sign in with Example SSO" {
		t.Fatalf("the OIDC realm's button reads %q", got)
	}
	if n := c.count("#realm option[value=corp]"); n != 1 {
		t.Fatalf("the LDAP realm is offered %d times", n)
	}
	c.shot("login-realms")

	p.QueueUser(t, testutil.OIDCUser{Subject: "s-7", Username: "Grace", Groups: []string{"engineering", "auditors"}})
	c.clickAway("#realm-sso")
	c.run(chromedp.WaitVisible("#who"))
	if who := c.text("#who"); who != "grace" {
		t.Fatalf("signed in as %q, want grace", who)
	}
	if loc := c.location(); !strings.HasSuffix(loc, "/ui/") {
		t.Fatalf("after the provider: %s, want the dashboard", loc)
	}
	// The Auditor's dashboard, not the sign-in page again.
	if c.count("#password") != 0 {
		t.Fatal("the sign-in page is shown after the provider's return")
	}
}

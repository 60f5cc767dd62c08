package testutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/oauth2-proxy/mockoidc"
)

// An OpenID Connect provider for the sign-in realms' tests: oauth2-proxy's
// mockoidc (pinned in go.mod), run as a process of its own on 127.0.0.1
// (this test binary, re-run with oidcProviderEnv). It speaks discovery,
// the authorization code flow with PKCE (S256 checked at the token
// endpoint), signed ID tokens and JWKS. Its authorization endpoint signs
// in at once the user queued next (QueueUser), with no page of its own.

const oidcProviderEnv = "COFFER_TEST_AS_OIDC_PROVIDER"

// OIDCProvider is a running provider: coffer's realm is configured with
// Issuer, ClientID and ClientSecret.
type OIDCProvider struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	in           io.WriteCloser
	out          *bufio.Reader
}

// OIDCUser is a user the provider signs in: its preferred_username and
// groups claims.
type OIDCUser struct {
	Subject  string   `json:"sub"`
	Username string   `json:"preferred_username"`
	Groups   []string `json:"groups"`
}

// StartOIDCProvider starts the provider process; it ends with the test.
// The test binary's TestMain must call RunOIDCProviderIfAsked.
func StartOIDCProvider(t testing.TB) *OIDCProvider {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), oidcProviderEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("OIDC provider: %v", err)
	}
	t.Cleanup(func() {
		_ = in.Close() // it exits at the end of its input
		_ = cmd.Wait()
	})
	p := &OIDCProvider{in: in, out: bufio.NewReader(outPipe)}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("OIDC provider did not start: %v", err)
	}
	if err := json.Unmarshal(line, p); err != nil {
		t.Fatalf("OIDC provider: %q: %v", line, err)
	}
	return p
}

// QueueUser makes u the user of the next sign-in, once the provider has
// taken it.
func (p *OIDCProvider) QueueUser(t testing.TB, u OIDCUser) {
	t.Helper()
	b, _ := json.Marshal(u)
	if _, err := fmt.Fprintf(p.in, "%s\n", b); err != nil {
		t.Fatal(err)
	}
	if ack, err := p.out.ReadString('\n'); err != nil || ack != "queued\n" {
		t.Fatalf("OIDC provider: %q, %v", ack, err)
	}
}

// RunOIDCProviderIfAsked runs the provider instead of the tests when this
// test binary was started as one (StartOIDCProvider): it prints its
// configuration, then queues the users read from standard input, one
// JSON line each, and exits at the end of it.
func RunOIDCProviderIfAsked() {
	if os.Getenv(oidcProviderEnv) != "1" {
		return
	}
	m, err := mockoidc.Run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mockoidc:", err)
		os.Exit(1)
	}
	cfg := m.Config()
	b, _ := json.Marshal(OIDCProvider{Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret})
	fmt.Printf("%s\n", b)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var u OIDCUser
		if err := json.Unmarshal(sc.Bytes(), &u); err != nil {
			fmt.Fprintln(os.Stderr, "mockoidc: a user:", err)
			os.Exit(1)
		}
		m.QueueUser(&mockoidc.MockUser{Subject: u.Subject, PreferredUsername: u.Username, Groups: u.Groups,
			Email: u.Username + "@example.test", EmailVerified: true})
		fmt.Println("queued")
	}
	_ = m.Shutdown()
	os.Exit(0)
}

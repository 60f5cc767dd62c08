package auth

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestRealmsExampleParses holds the example of docs/realms.md to the
// schema: every key known, every value valid, once the files it names
// exist (they are made here).
func TestRealmsExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/realms.md")
	must(t, err)
	block := regexp.MustCompile("(?s)```yaml\n(realms:.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/realms.md has no ```yaml block starting with realms:")
	}
	f, err := config.Parse(block[1])
	must(t, err)
	var cs []RealmConfig
	must(t, f.Decode("realms", &cs))
	if len(cs) < 2 {
		t.Fatalf("the example has %d realms", len(cs))
	}
	dir := t.TempDir()
	ca := testutil.NewTLSFiles(t, dir).CA
	secret := filepath.Join(dir, "secret")
	must(t, os.WriteFile(secret, []byte("s3cret\n"), 0o600))
	types := map[string]bool{}
	for i := range cs {
		types[cs[i].Type] = true
		if cs[i].CAFile != "" {
			cs[i].CAFile = ca
		}
		if cs[i].LDAP.BindPasswordFile != "" {
			cs[i].LDAP.BindPasswordFile = secret
		}
		if cs[i].OIDC.ClientSecretFile != "" {
			cs[i].OIDC.ClientSecretFile = secret
		}
	}
	must(t, CheckRealms(cs))
	for _, want := range []string{RealmLDAP, RealmActiveDirectory, RealmOIDC} {
		if !types[want] {
			t.Errorf("the example shows no %s realm", want)
		}
	}
}

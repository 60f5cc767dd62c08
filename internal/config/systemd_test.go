package config

import (
	"os"
	"path/filepath"
	"testing"
)

// Under a systemd unit, StateDirectory=, CacheDirectory= and a
// repository-password credential are the defaults of state-dir,
// cache-dir and password-file; the file, the COFFER_* variables and
// flags still decide first.
func TestSystemdDirectoriesAreDefaults(t *testing.T) {
	creds := t.TempDir()
	unit := map[string]string{"STATE_DIRECTORY": "/var/lib/coffer:/var/lib/other", "CACHE_DIRECTORY": "/var/cache/coffer",
		"CREDENTIALS_DIRECTORY": creds}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	r := &Resolver{Env: env(unit)}
	if v, src := r.Get("state-dir"); v != "/var/lib/coffer" || src != FromSystemd {
		t.Errorf("state-dir = %q from %s, want the unit's first state directory", v, src)
	}
	if v, src := r.Get("cache-dir"); v != "/var/cache/coffer" || src != FromSystemd {
		t.Errorf("cache-dir = %q from %s", v, src)
	}
	if v, src := r.Get("password-file"); v != "" || src != FromDefault {
		t.Errorf("password-file = %q from %s without the credential, want none", v, src)
	}
	pw := filepath.Join(creds, RepositoryPasswordCredential)
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, src := r.Get("password-file"); v != pw || src != FromSystemd {
		t.Errorf("password-file = %q from %s, want the credential %s", v, src, pw)
	}

	f, err := Parse([]byte("state-dir: /srv/coffer-state\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.File = f
	if v, src := r.Get("state-dir"); v != "/srv/coffer-state" || src != FromFile {
		t.Errorf("state-dir = %q from %s, want the file's", v, src)
	}
	unit["COFFER_PASSWORD_FILE"] = "/etc/coffer/other"
	if v, src := r.Get("password-file"); v != "/etc/coffer/other" || src != FromEnv {
		t.Errorf("password-file = %q from %s, want the environment's", v, src)
	}
	if v, src := (&Resolver{Env: env(nil)}).Get("state-dir"); v != "~/.local/state/coffer" || src != FromDefault {
		t.Errorf("outside systemd state-dir = %q from %s", v, src)
	}
}

package repo

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// writeConfigVersion writes the plaintext config with another format
// version, as a flipped digit or a newer coffer would.
func writeConfigVersion(t *testing.T, st store.Store, v int) {
	t.Helper()
	c, err := loadConfig(context.Background(), st)
	if err != nil && !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatal(err)
	}
	c.FormatVersion = v
	raw, _ := json.MarshalIndent(c, "", "  ")
	if _, err := store.Put(context.Background(), st, configName, raw, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A config whose version alone differs from the authenticated copy in the
// key files is damage, not a newer repository: it opens from the copy,
// says so, and `repair config` mends it; 0 is no version at all. A
// repository a newer coffer wrote (the copy says so too) is refused with
// a request to upgrade, with the right password or none.
func TestConfigVersionDamageAgainstNewerRepository(t *testing.T) {
	ctx := context.Background()
	st, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	pw := []byte("pw")
	if _, err := Init(ctx, st, InitOptions{Password: pw, KDF: fastKDF}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{0, 7} {
		writeConfigVersion(t, st, v)
		r, err := Open(ctx, st, pw, Options{})
		if err != nil {
			t.Fatalf("config version %d: %v", v, err)
		}
		if h := r.Health(); len(h) != 1 || h[0].Kind != "config" || r.Config().FormatVersion != FormatVersion {
			t.Fatalf("config version %d: health %+v, version %d", v, h, r.Config().FormatVersion)
		}
		if v == 7 && !strings.Contains(r.Health()[0].Detail, "says format version 7, but its authenticated copy") {
			t.Fatalf("the health issue of a version the copy contradicts: %s", r.Health()[0].Detail)
		}
		if _, err := r.RepairConfig(ctx, false); err != nil {
			t.Fatal(err)
		}
		if c, err := loadConfig(ctx, st); err != nil || c.FormatVersion != FormatVersion {
			t.Fatalf("after repair config: version %d, %v", c.FormatVersion, err)
		}
	}

	// A newer coffer's repository: its key's authenticated copy says 9.
	u, err := unlock(ctx, st, pw)
	if err != nil {
		t.Fatal(err)
	}
	p := u.payload
	newer := *p.Config
	newer.FormatVersion = 9
	p.Config = &newer
	kf, err := newKeyFile(p, pw, "", *fastKDF)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range keyNames(u.keyID) {
		if err := st.Delete(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := saveKeyFile(ctx, st, kf); err != nil {
		t.Fatal(err)
	}
	writeConfigVersion(t, st, 9)
	for _, password := range [][]byte{pw, nil} {
		if _, err := Open(ctx, st, password, Options{}); !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "upgrade coffer") {
			t.Fatalf("a newer repository (password %q): %v", password, err)
		}
	}
	if _, err := Open(ctx, st, []byte("wrong"), Options{}); err == nil {
		t.Fatal("a wrong password opened a newer repository")
	}
}

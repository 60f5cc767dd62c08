package catalogopen_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
)

func TestOpenChoosesDriver(t *testing.T) {
	ctx := context.Background()
	for _, loc := range []string{filepath.Join(t.TempDir(), "a", "catalog.db"), ":memory:"} {
		c, err := catalogopen.Open(ctx, loc)
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		if err := c.CreateJob(ctx, &catalog.Job{Kind: "backup"}); err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		_ = c.Close()
	}
	for _, loc := range []string{"", "mysql://u:secret@h/db"} {
		_, err := catalogopen.Open(ctx, loc)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Fatalf("%q: %v", loc, err)
		}
	}
	// A postgres DSN goes to the PostgreSQL driver (nothing listens here).
	_, err := catalogopen.Open(ctx, "postgres://u@127.0.0.1:1/db?connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("postgres DSN: %v", err)
	}
}

func TestDefaultLocation(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	got := catalogopen.DefaultLocation()
	if got != "/var/lib/coffer/catalog.db" && got != "/state/coffer/catalog.db" {
		t.Fatalf("DefaultLocation() = %q", got)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?x=1": "postgres://u:xxxxx@h:5432/db?x=1",
		"postgres://u@h/db":             "postgres://u@h/db",
		"/var/lib/coffer/catalog.db":    "/var/lib/coffer/catalog.db",
	} {
		if got := catalogopen.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

package all

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestOpenRefusesWhatIsNoLocation: an empty location, an unknown scheme,
// an S3 location with a parameter it does not know and contradictory s3.*
// settings are the caller's mistakes (api.Invalid), said before anything
// is contacted; a directory that does not exist is not a repository.
func TestOpenRefusesWhatIsNoLocation(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		location string
		cfg      Config
		want     string
	}{
		{"", Config{}, "no repository given"},
		{"ftp://host/x", Config{}, "unsupported repository location"},
		{"s3://bucket/prefix?color=blue", Config{}, `unknown parameter "color"`},
		{"s3://bucket/prefix?path-style=maybe", Config{}, `path-style="maybe" is not true or false`},
		{"s3://bucket/prefix", Config{S3: S3Config{LockMode: "forever"}}, "s3.lock-mode"},
		{"s3://bucket/prefix", Config{S3: S3Config{AccessKeyID: "id"}}, "s3.secret-access-key is not"},
	} {
		_, err := Open(ctx, tc.cfg, tc.location, slog.Default())
		if c, _ := api.ClassOf(err); c != api.Invalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (class %v); want an invalid request saying %q", tc.location, err, c, tc.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := Open(ctx, Config{}, missing, slog.Default()); !errors.Is(err, repo.ErrNotRepository) {
		t.Errorf("a missing directory: %v", err)
	}
	if st, err := Open(ctx, Config{}, t.TempDir(), slog.Default()); err != nil || st == nil {
		t.Errorf("a directory: %v", err)
	}
}

func TestIsURL(t *testing.T) {
	for loc, want := range map[string]bool{"s3://b/p": true, "/srv/repo": false, "repo": false, "./a:b//c": false, "c:": false} {
		if IsURL(loc) != want {
			t.Errorf("IsURL(%q) = %v", loc, !want)
		}
	}
}

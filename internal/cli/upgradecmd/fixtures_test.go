package upgradecmd_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestReleaseFixtures opens what each release left on disk
// (testdata/fixtures/*.tar.gz, written by scripts/release-fixture.sh with
// the release's binary; testdata/README.md says which) with this build:
// it verifies the repository with --read-data, restores every point
// bit-identical to the image it was taken of, opens it with either key,
// migrates the release's catalog to this build's schema, and lists the
// same points as the release did, in the repository and in the catalog.
func TestReleaseFixtures(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) == 0 {
		t.Fatal("no release fixture in testdata/fixtures: the first release's must stay")
	}
	for _, f := range fixtures {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".tar.gz"), func(t *testing.T) { openFixture(t, f) })
	}
}

func openFixture(t *testing.T, tarball string) {
	dir := filepath.Join(untar(t, tarball), "fixture")
	e := &clitest.Env{T: t, Dir: dir, Vars: map[string]string{
		"COFFER_CONFIG":    filepath.Join(dir, "coffer.yaml"),
		"COFFER_CACHE_DIR": t.TempDir(),
		"COFFER_STATE_DIR": t.TempDir(),
	}}
	// The configuration file names the repository, its password file and
	// the catalog relative to fixture/, where an operator would run it.
	t.Chdir(dir)
	released := clitest.Decode[[]api.BackupPoint](t, read(t, dir, "points.json"))

	e.Must("verify", "--read-data")
	for _, line := range strings.Split(strings.TrimSpace(read(t, dir, "sources.sha256")), "\n") {
		sum, point, _ := strings.Cut(line, " ")
		to := filepath.Join(t.TempDir(), "disk.raw")
		e.Must("restore", point, "--to", to)
		if got := sha256File(t, to); got != sum {
			t.Errorf("point %s restores to sha256 %s, the image it was taken of had %s", point, got, sum)
		}
	}
	// Either key opens it.
	e.Must("snapshots", "--password-file", "password-2")

	schema, err := strconv.Atoi(strings.TrimSpace(read(t, dir, "catalog-schema")))
	if err != nil {
		t.Fatal(err)
	}
	known, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	points := clitest.Decode[[]api.BackupPoint](t, e.Must("snapshots", "--json"))
	catalogued := clitest.Decode[[]api.BackupPoint](t, e.Must("catalog", "points", "--json"))
	if got := schemaOf(t, filepath.Join(dir, "catalog.db")); got != len(known) {
		t.Errorf("the release's catalog (schema %d) is at schema %d after this build opened it, want %d", schema, got, len(known))
	}
	t.Logf("catalog migrated from schema %d to %d", schema, len(known))
	want := pointKeys(released)
	if got := pointKeys(points); got != want {
		t.Errorf("this build lists the repository's points as\n%s\nthe release listed\n%s", got, want)
	}
	if got := pointKeys(catalogued); got != want {
		t.Errorf("this build lists the catalog's points as\n%s\nthe release listed\n%s", got, want)
	}
}

// pointKeys is what must not change about a list of points: their IDs,
// times (to the microsecond the catalog keeps), VMs, modes, parents and
// sizes, in no particular order (the catalog lists the newest first).
func pointKeys(ps []api.BackupPoint) string {
	var lines []string
	for _, p := range ps {
		lines = append(lines, strings.Join([]string{p.ID, p.Time.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano), p.VM, p.Mode,
			p.Parent, strconv.FormatInt(p.LogicalBytes, 10), strconv.Itoa(p.DiskCount)}, " "))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// schemaOf reads the catalog's schema version without migrating it.
func schemaOf(t *testing.T, path string) int {
	t.Helper()
	s, err := catalogopen.ReadSchema(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s.Applied
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// untar unpacks a fixture into a new temporary directory.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := tar.NewReader(z)
	for {
		h, err := r.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(to, 0o700)
		case tar.TypeReg:
			var w *os.File
			if w, err = os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777); err == nil {
				_, err = io.Copy(w, r)
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
		default:
			t.Fatalf("%s: unexpected entry %s in a fixture", path, h.Name)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

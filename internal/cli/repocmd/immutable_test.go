package repocmd_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// Helpers of the immutability tests (the S3 policy, vSphere and copy
// tests): what a point needs is locked at the server, an attacker holding
// the bucket's admin keys cannot make it unrestorable, and the point comes
// back with nothing but the bucket and the password.

// requirePointLocked opens the repository at bucket/prefix as coffer does
// (admin keys, the password) and fails unless everything point needs is
// locked until at least min: its manifest, each disk map, each pack
// holding one of its chunks, and every version of the config and of every
// key file. It returns how many packs the point needs.
func requirePointLocked(t *testing.T, srv *testutil.S3Server, bucket, prefix, password, point string, min time.Time) int {
	t.Helper()
	ctx := context.Background()
	st, err := s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: prefix, Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := repo.Open(ctx, st, []byte(password), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.FindPoint(ctx, point)
	if err != nil {
		t.Fatal(err)
	}
	locked := func(name string) {
		t.Helper()
		fi, err := st.Stat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.RetainUntil.Before(min) {
			t.Fatalf("%s is locked until %v, want at least %v", name, fi.RetainUntil, min)
		}
	}
	locked("snapshots/" + s.ID.String())
	packs := map[repo.PackID]bool{}
	for _, d := range s.Disks {
		locked(d.Map)
		m, err := r.OpenDiskMap(ctx, d.Map)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := m.All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ids {
			if x.IsZero() {
				continue
			}
			loc, found, err := r.Index().Lookup(ctx, x)
			if err != nil || !found {
				t.Fatalf("chunk %s of %s: found=%v %v", x.Short(), d.Map, found, err)
			}
			packs[loc.Pack] = true
		}
	}
	for p := range packs {
		locked(repo.PackObjectName(p))
	}
	versions := 0
	for _, p := range []string{"config", "keys/"} {
		err := st.Versions(ctx, p, func(name string, vs []store.Version) error {
			for _, v := range vs {
				if v.Marker {
					continue
				}
				versions++
				if v.RetainUntil.Before(min) {
					t.Errorf("%s version %s is locked until %v, want at least %v", name, v.ID, v.RetainUntil, min)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if versions < 2 {
		t.Fatalf("%d versions of config and key files", versions)
	}
	return len(packs)
}

// attackRepository is someone holding the bucket's admin keys who wants
// the backups gone: every version of every object under prefix is
// deleted (asking to bypass governance locks), the config and the key
// files are overwritten with garbage, and whatever is left is hidden
// behind a delete marker. It fails the test unless, afterwards, nothing of
// the repository can be listed any more, and returns how many versions
// the server refused to delete.
func attackRepository(t *testing.T, srv *testutil.S3Server, bucket, prefix string) int {
	t.Helper()
	ctx := context.Background()
	cli := srv.Client()
	keys := map[string]bool{}
	refused := 0
	p := s3.NewListObjectVersionsPaginator(cli, &s3.ListObjectVersionsInput{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	var all []struct{ key, version string }
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			all = append(all, struct{ key, version string }{aws.ToString(v.Key), aws.ToString(v.VersionId)})
		}
		for _, m := range page.DeleteMarkers {
			all = append(all, struct{ key, version string }{aws.ToString(m.Key), aws.ToString(m.VersionId)})
		}
	}
	for _, v := range all {
		keys[v.key] = true
		_, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(v.key), VersionId: aws.String(v.version),
			BypassGovernanceRetention: aws.Bool(true)})
		if err != nil {
			refused++
		}
	}
	for k := range keys {
		if k == prefix+"/config" || strings.HasPrefix(k, prefix+"/keys/") {
			if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(k), Body: strings.NewReader("ransom note")}); err != nil {
				t.Fatalf("overwrite %s: %v", k, err)
			}
		}
		if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(k)}); err != nil {
			t.Fatalf("hide %s: %v", k, err)
		}
	}
	left, err := cli.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Contents) != 0 {
		t.Fatalf("%d objects still listed after the attack, e.g. %s", len(left.Contents), aws.ToString(left.Contents[0].Key))
	}
	if refused == 0 {
		t.Fatal("the server deleted every version: nothing was locked")
	}
	return refused
}

// recoverAndRestore brings the repository of e back after attackRepository
// with nothing but the bucket and the password (a fresh metadata cache and
// catalog): `repair undelete`, `repair index`, a full verify, and a restore
// of point into a file, whose path it returns.
func recoverAndRestore(t *testing.T, e *clitest.Env, point string) string {
	t.Helper()
	fresh := t.TempDir()
	e.Vars["COFFER_CACHE_DIR"] = filepath.Join(fresh, "cache")
	e.Vars["COFFER_CATALOG"] = filepath.Join(fresh, "catalog.db")
	if out := e.Expect(command.ExitNoRepo, "snapshots"); !strings.Contains(out, "not a coffer repository") {
		t.Fatalf("after the attack: %s", out)
	}
	if out := e.Must("repair", "undelete"); !strings.Contains(out, "coffer repair index") {
		t.Fatalf("undelete: %s", out)
	}
	e.Must("repair", "index")
	if ids := snapshotIDs(clitest.SnapshotsJSON(t, e)); !strings.Contains(ids, point) {
		t.Fatalf("point %s is not back: %q", point, ids)
	}
	e.Must("verify", "--read-data")
	out := filepath.Join(fresh, "restored.img")
	e.Must("restore", point, "--to", out)
	return out
}

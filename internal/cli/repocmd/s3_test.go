package repocmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/coffer-backup/coffer/internal/repo"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// newS3Env is newEnv with the repository in a fresh bucket of srv, reached
// through endpoint (the server, or a fault proxy in front of it).
func newS3Env(t *testing.T, srv *testutil.S3Server, objectLock bool, endpoint string) (*clitest.Env, string) {
	e := clitest.NewEnv(t)
	bucket := srv.Bucket(t, objectLock)
	e.Repo = "s3://" + bucket + "/repo"
	e.Vars["COFFER_REPO"] = e.Repo
	for k, v := range srv.Env() {
		e.Vars[k] = v
	}
	e.Vars["COFFER_S3_ENDPOINT"] = endpoint
	e.Vars["COFFER_CACHE_DIR"] = filepath.Join(e.Dir, "cache")
	return e, bucket
}

// storedBytes sums the sizes of a bucket's objects under prefix.
func storedBytes(t *testing.T, srv *testutil.S3Server, bucket, prefix string) int64 {
	var n int64
	p := s3.NewListObjectsV2Paginator(srv.Client(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			n += aws.ToInt64(o.Size)
		}
	}
	return n
}

type gcResult struct {
	PacksDeleted int `json:"packs_deleted"`
	Retained     int `json:"objects_locked"`
}

// TestS3RepositoryLifecycle runs the repository's whole life through the
// CLI on an s3:// repository: init, backups, listing, restore, verify,
// forget, gc, stats and leases, and reports the requests it took.
func TestS3RepositoryLifecycle(t *testing.T) {
	srv := testutil.StartS3(t)
	proxy := testutil.StartFaultProxy(t, srv.Endpoint, 1) // no faults: counts requests
	e, bucket := newS3Env(t, srv, false, proxy.URL)
	e.Must("init", "--pack-size", "1MiB")
	img := e.Image("vm.img", 64<<20, 24)
	before := proxy.Count()
	e.Must("backup", "disk", img, "--name", "vm")
	backupReqs := proxy.Count() - before
	for i := range 2 {
		changeMiB(t, img, int64(i)*4<<20)
		e.Must("backup", "disk", img, "--name", "vm")
	}
	if n := len(clitest.SnapshotsJSON(t, e)); n != 3 {
		t.Fatalf("%d snapshots, want 3", n)
	}
	before = proxy.Count()
	out := filepath.Join(e.Dir, "restored.img")
	e.Must("restore", "latest", "--to", out)
	restoreReqs := proxy.Count() - before
	if !clitest.SameFile(t, out, img) {
		t.Fatal("restore from S3 differs")
	}
	e.Must("verify", "--read-data")
	e.Must("stats", "--json")
	// Packs are compared by bytes, not by count: gc repacks partly dead
	// packs into new ones, so one pack deleted and one repacked leaves the
	// count unchanged.
	stored := storedBytes(t, srv, bucket, "repo/data/")
	e.Must("forget", "--keep-last", "1")
	var rep gcResult
	if err := json.Unmarshal([]byte(e.Must("gc", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	after := storedBytes(t, srv, bucket, "repo/data/")
	if rep.PacksDeleted == 0 || after >= stored {
		t.Fatalf("gc deleted %d packs: %d -> %d bytes of packs", rep.PacksDeleted, stored, after)
	}
	if j := e.JobOf("gc"); !clitest.LogHas(j, "test-and-set by S3 conditional writes") {
		t.Errorf("gc's log does not say the test-and-set is a conditional write: %+v", j.Events)
	}
	e.Must("verify", "--read-data")
	out2 := filepath.Join(e.Dir, "restored2.img")
	e.Must("restore", "latest", "--to", out2)
	if !clitest.SameFile(t, out2, img) {
		t.Fatal("restore after gc differs")
	}
	// The second listing reads index segments and manifests from the
	// metadata cache.
	gets := func() int64 {
		before := proxy.Count("GET")
		clitest.SnapshotsJSON(t, e)
		return proxy.Count("GET") - before
	}
	e.Vars["COFFER_CACHE_MAX_SIZE"] = "0"
	cold := gets()
	delete(e.Vars, "COFFER_CACHE_MAX_SIZE")
	os.Unsetenv("COFFER_CACHE_MAX_SIZE")
	gets()
	warm := gets()
	if warm >= cold {
		t.Fatalf("listing took %d GETs, then %d with the cache", cold, warm)
	}
	if l := strings.TrimSpace(e.Must("locks", "--json")); l != "[]" && l != "null" {
		t.Fatalf("leases left behind: %s", l)
	}
	const gib = float64(1 << 30)
	t.Logf("listing backups: %d GET requests without the metadata cache, %d with it", cold, warm)
	t.Logf("S3 requests: backup of 24 MiB of data %d (%.0f per GiB), restore %d (%.0f per GiB)",
		backupReqs, float64(backupReqs)/(24<<20)*gib, restoreReqs, float64(restoreReqs)/(24<<20)*gib)
}

// TestS3UnderFaults backs up, restores, forgets and collects garbage while
// a proxy throttles, resets connections (before and after the server
// acted), cuts responses and delays requests. Nothing may fail, and the
// repository must verify clean and restore exactly.
func TestS3UnderFaults(t *testing.T) {
	srv := testutil.StartS3(t)
	proxy := testutil.StartFaultProxy(t, srv.Endpoint, 7)
	e, _ := newS3Env(t, srv, false, proxy.URL)
	e.Must("init", "--pack-size", "1MiB")
	img := e.Image("vm.img", 48<<20, 12)
	proxy.SetFaults(testutil.Faults{SlowDown: 0.04, ResetBefore: 0.02, ResetAfter: 0.02, CutBody: 0.02,
		Delay: 0.05, DelayFor: 30 * time.Millisecond})
	for i := range 3 {
		changeMiB(t, img, int64(i)*2<<20)
		e.Must("backup", "disk", img, "--name", "vm")
	}
	out := filepath.Join(e.Dir, "restored.img")
	e.Must("restore", "latest", "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatal("restore under faults differs")
	}
	e.Must("forget", "--keep-last", "2")
	e.Must("gc")
	e.Must("verify", "--read-data")
	proxy.SetFaults(testutil.Faults{})
	e.Must("verify", "--read-data")
	if proxy.Injected.Load() < 10 {
		t.Fatalf("only %d faults injected", proxy.Injected.Load())
	}
	t.Logf("%d faults injected in %d requests", proxy.Injected.Load(), proxy.Count())
}

// TestS3ImmutableBackups: with Object Lock, every object an immutable
// backup needs is locked at the server, forget and gc leave them alone
// (and still collect what is not locked), and the server refuses to delete
// them even with coffer's own credentials.
func TestS3ImmutableBackups(t *testing.T) {
	srv := testutil.StartS3(t)
	e, bucket := newS3Env(t, srv, true, srv.Endpoint)
	e.Vars["COFFER_S3_LOCK_MODE"] = "governance"
	e.Must("init", "--pack-size", "1MiB")
	img := e.Image("vm.img", 32<<20, 8)
	e.Must("backup", "disk", img, "--name", "vm", "--immutable-for", "2h")
	locked := clitest.SnapshotsJSON(t, e)[0]
	// The same MiB changes twice: the middle backup's version of it is
	// unique, unlocked, and garbage once that backup is forgotten.
	for range 2 {
		changeMiB(t, img, 2<<20)
		e.Must("backup", "disk", img, "--name", "vm")
	}
	ctx := context.Background()
	cli := srv.Client()
	minUntil := time.Now().Add(2 * time.Hour).Add(-time.Minute)
	var lockedKeys []string
	for _, prefix := range []string{"repo/snapshots/" + locked.ID, "repo/maps/", "repo/data/"} {
		p := s3.NewListObjectsV2Paginator(cli, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				ret, err := cli.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: &bucket, Key: o.Key})
				if err == nil && aws.ToTime(ret.Retention.RetainUntilDate).After(minUntil) {
					lockedKeys = append(lockedKeys, aws.ToString(o.Key))
				}
			}
		}
	}
	if len(lockedKeys) < 3 || !containsPrefix(lockedKeys, "repo/snapshots/") || !containsPrefix(lockedKeys, "repo/data/") {
		t.Fatalf("locked objects: %v", lockedKeys)
	}
	e.Must("forget", "--keep-last", "1")
	if ids := snapshotIDs(clitest.SnapshotsJSON(t, e)); !strings.Contains(ids, locked.ID) || len(strings.Fields(ids)) != 2 {
		t.Fatalf("after forget: %s (the locked %s must stay)", ids, locked.ShortID)
	}
	var rep gcResult
	if err := json.Unmarshal([]byte(e.Must("gc", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.PacksDeleted == 0 {
		t.Fatal("gc deleted nothing on the Object Lock bucket")
	}
	e.Must("verify", "--read-data")
	out := filepath.Join(e.Dir, "locked.img")
	e.Must("restore", locked.ID, "--to", out)
	// coffer's own credentials cannot delete a locked version.
	for _, k := range lockedKeys {
		head, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String(k)})
		if err != nil {
			t.Fatalf("%s vanished: %v", k, err)
		}
		if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(k), VersionId: head.VersionId}); err == nil {
			t.Fatalf("the server deleted locked %s", k)
		}
	}
	t.Logf("%d objects locked, gc deleted %d packs and kept %d retained objects", len(lockedKeys), rep.PacksDeleted, rep.Retained)
}

func containsPrefix(keys []string, p string) bool {
	for _, k := range keys {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func snapshotIDs(v []api.BackupPoint) string {
	var ids []string
	for _, s := range v {
		ids = append(ids, s.ID)
	}
	return strings.Join(ids, " ")
}

// TestS3WithoutConditionalWrites: on a server without conditional writes
// (forced here), init says so and the repository works on the fallback.
func TestS3WithoutConditionalWrites(t *testing.T) {
	srv := testutil.StartS3(t)
	e, _ := newS3Env(t, srv, false, srv.Endpoint)
	e.Vars["COFFER_S3_CONDITIONAL_WRITES"] = "off"
	if out := e.Must("init"); !strings.Contains(out, "does not enforce conditional writes") {
		t.Fatalf("init did not warn: %s", out)
	}
	img := e.Image("vm.img", 16<<20, 4)
	e.Must("backup", "disk", img)
	e.Must("gc")
	if j := e.JobOf("gc"); !clitest.LogHas(j, "test-and-set by emulated (HEAD, PUT, HEAD)") {
		t.Errorf("gc's log does not say the test-and-set is emulated: %+v", j.Events)
	}
	e.Must("verify", "--read-data")
	e.Vars["COFFER_S3_CONDITIONAL_WRITES"] = "sometimes"
	e.Expect(command.ExitUsage, "snapshots")
}

// TestS3AppendOnlyCredentials: a credential that may write but not delete
// is enough to initialise, back up (immutably), list, restore and verify;
// forgetting needs more and says so with the access exit code.
func TestS3AppendOnlyCredentials(t *testing.T) {
	srv := testutil.StartS3(t)
	e, bucket := newS3Env(t, srv, true, srv.Endpoint)
	e.Vars["AWS_ACCESS_KEY_ID"], e.Vars["AWS_SECRET_ACCESS_KEY"] = srv.AppendOnlyUser(t, bucket)
	e.Must("init")
	img := e.Image("vm.img", 16<<20, 4)
	start := time.Now()
	e.Must("backup", "disk", img, "--immutable-for", "1h")
	// Without s3:ListBucketVersions the current config and key (both of
	// its copies) are locked.
	for prefix, want := range map[string]int{"repo/config": 1, "repo/keys/": 2} {
		page, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix)})
		if err != nil || len(page.Contents) != want {
			t.Fatalf("%s: %d objects, want %d (%v)", prefix, len(page.Contents), want, err)
		}
		for _, o := range page.Contents {
			head, err := srv.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			if until := aws.ToTime(head.ObjectLockRetainUntilDate); until.Before(start.Add(time.Hour)) {
				t.Fatalf("%s locked until %v", aws.ToString(o.Key), until)
			}
		}
	}
	for i := range 2 {
		changeMiB(t, img, int64(i)<<20)
		e.Must("backup", "disk", img)
	}
	out := filepath.Join(e.Dir, "r.img")
	e.Must("restore", "latest", "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatal("restore differs")
	}
	e.Must("verify", "--read-data")
	if msg := e.Expect(command.ExitAccess, "forget", "--keep-last", "1"); !strings.Contains(msg, "permission denied") {
		t.Fatalf("unclear message: %s", msg)
	}
	e.Must("verify")
}

// s3Servers are the S3 implementations the crash loops run on.
var s3Servers = []struct {
	name  string
	start func(testing.TB) *testutil.S3Server
}{{"versitygw", testutil.StartS3}, {"seaweedfs", testutil.StartSeaweedFS}}

// TestS3KillNineDuringBackup and TestS3KillNineDuringGC run the crash loops
// on s3:// repositories of each server (versioned Object Lock buckets for
// gc, where a delete stacks a marker): after every SIGKILL the repository
// verifies, and the final backup stores no chunk twice.
func TestS3KillNineDuringBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	for _, s := range s3Servers {
		t.Run(s.name, func(t *testing.T) {
			srv := s.start(t)
			e, _ := newS3Env(t, srv, false, srv.Endpoint)
			probe, _ := newS3Env(t, srv, false, srv.Endpoint)
			killNineDuringBackup(t, e, probe)
		})
	}
}

func TestS3KillNineDuringGC(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	for _, s := range s3Servers {
		t.Run(s.name, func(t *testing.T) {
			srv := s.start(t)
			e, _ := newS3Env(t, srv, true, srv.Endpoint)
			killNineDuringGC(t, e, soakRounds(8))
		})
	}
}

// TestS3MaintenanceLease: the maintenance lease on S3 is a conditional
// create; while another process holds it, gc stops at once with the
// locked exit code and names the holder, and works once it is released.
func TestS3MaintenanceLease(t *testing.T) {
	srv := testutil.StartS3(t)
	e, bucket := newS3Env(t, srv, false, srv.Endpoint)
	e.Must("init")
	ctx := context.Background()
	st, err := s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: "repo", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte("correct horse"), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.AcquireLease(ctx, "gc", "", "held by the test", true)
	if err != nil {
		t.Fatal(err)
	}
	if out := e.Expect(command.ExitLocked, "gc"); !strings.Contains(out, "locked by gc") {
		t.Fatalf("no holder named: %s", out)
	}
	if _, err := r.AcquireLease(ctx, "gc", "", "second", true); !errors.Is(err, repo.ErrLocked) {
		t.Fatalf("second maintenance lease: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e.Must("gc")
}

package repocmd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// soakRounds is how many kills a crash loop makes: base in the test suite,
// COFFER_SOAK (scripts/soak.sh) for long runs.
func soakRounds(base int) int {
	if n, err := strconv.Atoi(os.Getenv("COFFER_SOAK")); err == nil && n > 0 {
		return n
	}
	return base
}

// generations backs up n versions of one image as points of VM "vm" and
// keeps a copy of each version to compare restores with.
func generations(e *clitest.Env, n int) (img string, versions []string) {
	e.T.Helper()
	img = e.Image("vm.img", 32<<20, 8)
	for i := range n {
		rewrite(e, img, i)
		e.Must("backup", "disk", img, "--name", "vm")
		versions = append(versions, copyFile(e, img, fmt.Sprintf("gen-%d.img", i)))
	}
	return img, versions
}

// rewrite overwrites 1.5 MiB of the image with new random data at an
// offset that alternates with i: each generation leaves some chunks of the
// previous one dead and keeps others, so forgetting points gives garbage
// collection whole packs to delete and partly dead packs to repack.
func rewrite(e *clitest.Env, img string, i int) {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1536<<10)
	_, _ = rand.Read(buf)
	if _, err := f.WriteAt(buf, int64(i%2)*(1<<20)); err != nil {
		e.T.Fatal(err)
	}
}

func copyFile(e *clitest.Env, src, name string) string {
	e.T.Helper()
	dst := filepath.Join(e.Dir, name)
	if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		e.T.Fatalf("cp: %v %s", err, out)
	}
	return dst
}

// restoresAll checks that the repository holds exactly the given versions
// as points (oldest first) and that each restores byte-identical.
func restoresAll(e *clitest.Env, versions []string) {
	e.T.Helper()
	snaps := clitest.SnapshotsJSON(e.T, e)
	if len(snaps) != len(versions) {
		e.T.Fatalf("%d points, want %d", len(snaps), len(versions))
	}
	for i, s := range snaps {
		out := filepath.Join(e.Dir, "restored-"+s.ShortID)
		e.Must("restore", s.ID, "--to", out)
		if !clitest.SameFile(e.T, out, versions[i]) {
			e.T.Fatalf("point %s restores different bytes than generation %d", s.ShortID, i)
		}
		_ = os.Remove(out)
	}
}

// crashed runs a child coffer that kills itself at its n-th store mutation
// (after it, with after). It reports whether the command completed instead.
func crashed(e *clitest.Env, n int, after bool, args ...string) bool {
	e.T.Helper()
	cmd := e.Child(args...)
	at := strconv.Itoa(n)
	if after {
		at += "+"
	}
	cmd.Env = append(cmd.Env, "COFFER_TEST_CRASH_AT="+at)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return false
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
		e.T.Fatalf("coffer %v (crash at %s) failed instead of being killed: %v\n%s", args, at, err, out)
	}
	return true
}

// repoSnapshot saves and restores the state of a repository, so that every
// crash point starts from the same state.
type repoSnapshot interface {
	save()
	restore()
}

// gcCrashPoints kills garbage collection at each of its store mutations in
// turn, before and after the mutation, each time from the same repository
// state. After every kill the repository must verify; then one more point
// is forgotten, so that the next gc plans new work on top of whatever the
// killed one left (a compacted index without a plan, a half-executed plan),
// and it must finish with nothing lost.
func gcCrashPoints(t *testing.T, e *clitest.Env, snap repoSnapshot) {
	e.Must("init", "--pack-size", "1MiB")
	_, versions := generations(e, 6)
	e.Must("forget", "--keep-last", "3")
	versions = versions[3:]
	snap.save()
	steps := 0
	for n := 1; ; n++ {
		completed := false
		for _, after := range []bool{false, true} {
			snap.restore()
			if !crashed(e, n, after, "gc") {
				completed = true
				break
			}
			e.Must("verify")
			e.Must("forget", "--keep-last", "2")
			e.Must("gc")
			e.Must("verify", "--read-data")
			if got := len(clitest.SnapshotsJSON(t, e)); got != 2 {
				t.Fatalf("crash at mutation %d (after=%v): %d points, want 2", n, after, got)
			}
		}
		if completed {
			steps = n - 1
			break
		}
	}
	e.Must("forget", "--keep-last", "2")
	e.Must("gc")
	t.Logf("gc interrupted at each of its %d mutations, before and after", steps)
	if steps < 10 {
		t.Fatalf("gc made only %d mutations: the scenario gives it no real work", steps)
	}
	restoresAll(e, versions[1:])
}

// localSnapshot copies a local repository directory aside.
type localSnapshot struct{ e *clitest.Env }

func (s localSnapshot) save() {
	copyTree(s.e, s.e.Repo, s.e.Repo+".saved")
}

func (s localSnapshot) restore() {
	if err := os.RemoveAll(s.e.Repo); err != nil {
		s.e.T.Fatal(err)
	}
	copyTree(s.e, s.e.Repo+".saved", s.e.Repo)
}

func copyTree(e *clitest.Env, src, dst string) {
	e.T.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		e.T.Fatalf("cp -a: %v %s", err, out)
	}
}

// bucketSnapshot keeps every object of an (unversioned) bucket in memory.
type bucketSnapshot struct {
	e       *clitest.Env
	srv     *testutil.S3Server
	bucket  string
	objects map[string][]byte
}

func (s *bucketSnapshot) keys() []string {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.srv.Client(), &s3.ListObjectsV2Input{Bucket: &s.bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			s.e.T.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

func (s *bucketSnapshot) save() {
	ctx, cli := context.Background(), s.srv.Client()
	s.objects = map[string][]byte{}
	for _, k := range s.keys() {
		out, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(k)})
		if err != nil {
			s.e.T.Fatal(err)
		}
		b, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			s.e.T.Fatal(err)
		}
		s.objects[k] = b
	}
}

func (s *bucketSnapshot) restore() {
	ctx, cli := context.Background(), s.srv.Client()
	for _, k := range s.keys() {
		if _, ok := s.objects[k]; ok {
			continue
		}
		if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(k)}); err != nil {
			s.e.T.Fatal(err)
		}
	}
	for k, b := range s.objects {
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(k), Body: bytes.NewReader(b)}); err != nil {
			s.e.T.Fatal(err)
		}
	}
	// The metadata cache may hold objects that the restored state lacks.
	_ = os.RemoveAll(s.e.Vars["COFFER_CACHE_DIR"])
}

func TestGCCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	e := clitest.NewEnv(t)
	gcCrashPoints(t, e, localSnapshot{e})
}

func TestS3GCCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	for _, s := range s3Servers {
		t.Run(s.name, func(t *testing.T) {
			srv := s.start(t)
			e, bucket := newS3Env(t, srv, false, srv.Endpoint)
			gcCrashPoints(t, e, &bucketSnapshot{e: e, srv: srv, bucket: bucket})
		})
	}
}

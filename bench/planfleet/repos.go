package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// repositories hands each run a new, empty repository: a directory, or
// a prefix of one bucket of a versitygw the benchmark started. The one
// before is closed and its data removed (a run writes about half its
// disks' data: 14 runs of 24 VMs would keep 5 GB).
type repositories struct {
	kind, dir string
	s3        *testutil.S3Server
	bucket    string
	made      int
	last      store.Store
}

func newRepositories(ctx context.Context, kind, dir string) *repositories {
	rs := &repositories{kind: kind, dir: dir}
	benchutil.Check(os.MkdirAll(dir, 0o755))
	switch kind {
	case "local":
	case "s3":
		bin, err := exec.LookPath("versitygw")
		if err != nil {
			benchutil.Fatalf("-store s3 needs versitygw on PATH (scripts/ci/install-s3.sh): %v", err)
		}
		srv, stop, err := testutil.LaunchS3(bin, filepath.Join(dir, "server"))
		benchutil.Check(err)
		benchutil.AtExit(stop)
		rs.s3 = srv
		rs.bucket, err = srv.CreateBucket(ctx, false)
		benchutil.Check(err)
	default:
		benchutil.Fatalf("-store %q: local or s3", kind)
	}
	benchutil.AtExit(rs.close)
	return rs
}

func (rs *repositories) String() string {
	if rs.s3 != nil {
		return fmt.Sprintf("versitygw at %s, bucket %s, a prefix per run", rs.s3.Endpoint, rs.bucket)
	}
	return "a new directory per run, " + rs.dir
}

// next initialises and opens a new repository.
func (rs *repositories) next(ctx context.Context) *repo.Repository {
	rs.close()
	rs.made++
	var st store.Store
	var err error
	if rs.s3 != nil {
		st, err = s3store.Open(ctx, s3store.Config{Bucket: rs.bucket, Prefix: rs.prefix(), Endpoint: rs.s3.Endpoint,
			Region: "us-east-1", PathStyle: true, AccessKeyID: rs.s3.AccessKey, SecretAccessKey: rs.s3.SecretKey})
	} else {
		st, err = local.Create(filepath.Join(rs.dir, rs.prefix()))
	}
	benchutil.Check(err)
	rs.last = st
	salt := make([]byte, 16)
	rand.Read(salt)
	kdf := &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: salt}
	_, err = repo.Init(ctx, st, repo.InitOptions{Password: []byte("bench"), KDF: kdf})
	benchutil.Check(err)
	r, err := repo.Open(ctx, st, []byte("bench"), repo.Options{})
	benchutil.Check(err)
	return r
}

// close closes the last repository and removes its data (for S3, the
// files of its prefix in the server's posix backend).
func (rs *repositories) close() {
	if rs.last == nil {
		return
	}
	rs.last.Close()
	rs.last = nil
	path := filepath.Join(rs.dir, rs.prefix())
	if rs.s3 != nil {
		path = filepath.Join(rs.s3.Dir, rs.bucket, rs.prefix())
	}
	if err := os.RemoveAll(path); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

func (rs *repositories) prefix() string { return fmt.Sprintf("run-%d", rs.made) }

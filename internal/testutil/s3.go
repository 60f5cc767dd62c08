package testutil

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Server is a real S3 server (versitygw, posix backend) started for one
// test on 127.0.0.1, with its data in a temporary directory.
type S3Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Dir       string // the server's bucket root
	bin       string
}

// StartS3 starts versitygw (installed by scripts/ci/install-s3.sh into
// .cache/bin) and returns once it answers. It skips the test when the
// binary is missing, unless integration tests are mandatory (Strict). The
// server stops when the test ends, and if the test binary dies.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	bin := RequireBinary(t, "versitygw")
	srv, stop, err := LaunchS3(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return srv
}

// LaunchS3 starts versitygw with its data under dir (benchmarks use it
// outside tests); stop ends the server.
func LaunchS3(bin, dir string) (srv *S3Server, stop func(), err error) {
	return launchS3(bin, dir, "127.0.0.1")
}

// StartS3OnLab is StartS3 listening on the lab's gateway, which the
// lab's hosts reach (and this machine too).
func StartS3OnLab(t testing.TB, lab *NetLab) *S3Server {
	t.Helper()
	bin := RequireBinary(t, "versitygw")
	srv, stop, err := launchS3(bin, t.TempDir(), lab.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return srv
}

func launchS3(bin, dir, host string) (srv *S3Server, stop func(), err error) {
	// Absolute, separate directories: versitygw refuses a versioning
	// directory inside its root and needs xattrs (tmpfs and ext4 have them).
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, nil, err
	}
	root, ver, iam := filepath.Join(dir, "root"), filepath.Join(dir, "versions"), filepath.Join(dir, "iam")
	for _, d := range []string{root, ver, iam} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, err
		}
	}
	srv = &S3Server{bin: bin, AccessKey: "coffer-test-" + randHex(4), SecretKey: randHex(16), Dir: root}
	var lastErr error
	for range 5 { // the free port may be taken between probe and bind
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		if stop, lastErr = srv.start(host, port, root, ver, iam); lastErr == nil {
			return srv, stop, nil
		}
	}
	return nil, nil, fmt.Errorf("start versitygw: %w", lastErr)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (srv *S3Server) start(host string, port int, root, ver, iam string) (func(), error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	var log bytes.Buffer
	cmd := exec.Command(srv.bin, "--access", srv.AccessKey, "--secret", srv.SecretKey, "--port", addr,
		"--health", "/health", "--quiet", "--iam-dir", iam, "posix", "--versioning-dir", ver, root)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				srv.Endpoint = url
				return stop, nil
			}
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("versitygw exited at startup:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("versitygw not ready after 30 s:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// CreateBucket creates a bucket with a unique name, with Object Lock (and
// so versioning) when objectLock is set.
func (srv *S3Server) CreateBucket(ctx context.Context, objectLock bool) (string, error) {
	name := "coffer-" + randHex(6)
	_, err := srv.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name, ObjectLockEnabledForBucket: aws.Bool(objectLock)})
	return name, err
}

// Client returns an SDK client for the server (path-style, admin keys).
func (srv *S3Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
}

// Bucket creates a bucket with a unique name (see CreateBucket).
func (srv *S3Server) Bucket(t testing.TB, objectLock bool) string {
	t.Helper()
	name, err := srv.CreateBucket(context.Background(), objectLock)
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return name
}

// Env returns the environment variables that point the AWS chain (and
// coffer's s3 keys) at the server.
func (srv *S3Server) Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     srv.AccessKey,
		"AWS_SECRET_ACCESS_KEY": srv.SecretKey,
		"AWS_REGION":            "us-east-1",
		"COFFER_S3_ENDPOINT":    srv.Endpoint,
		"COFFER_S3_PATH_STYLE":  "true",
	}
}

// AppendOnlyUser creates a user that may read, list and write bucket
// (including setting retention) but not delete, and returns its keys.
func (srv *S3Server) AppendOnlyUser(t testing.TB, bucket string) (access, secret string) {
	t.Helper()
	access, secret = "append-"+randHex(4), randHex(16)
	out, err := exec.Command(srv.bin, "admin", "--access", srv.AccessKey, "--secret", srv.SecretKey,
		"--endpoint-url", srv.Endpoint, "create-user", "--access", access, "--secret", secret, "--role", "user").CombinedOutput()
	if err != nil {
		t.Fatalf("create user: %v\n%s", err, out)
	}
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":[%q]},
"Action":["s3:GetObject","s3:PutObject","s3:ListBucket","s3:GetBucketObjectLockConfiguration","s3:GetBucketVersioning",
"s3:PutObjectRetention","s3:GetObjectRetention","s3:AbortMultipartUpload","s3:ListBucketMultipartUploads","s3:ListMultipartUploadParts"],
"Resource":["arn:aws:s3:::%s","arn:aws:s3:::%s/*"]}]}`, access, bucket, bucket)
	_, err = srv.Client().PutBucketPolicy(context.Background(), &s3.PutBucketPolicyInput{Bucket: &bucket, Policy: &policy})
	if err != nil {
		t.Fatalf("bucket policy: %v", err)
	}
	return access, secret
}

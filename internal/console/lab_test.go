package console_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli"
	"github.com/coffer-backup/coffer/internal/console"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// The console's tests drive Debian's Chromium (chromedp) against `coffer
// server` run as a real process (this test binary, re-run as coffer),
// over a real repository and catalog.

func TestMain(m *testing.M) {
	testutil.RunOIDCProviderIfAsked()
	servicetest.RegisterFake()
	if os.Getenv("COFFER_TEST_AS_CLI") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// lab is an installation: a repository, a catalog, a configuration and
// a state directory, and the coffer server serving them.
type lab struct {
	t    *testing.T
	dir  string
	vars map[string]string
	srv  *serverProc
	// listen is the server's --listen (default a free loopback port;
	// localhost:0 for security keys, which browsers refuse at an IP
	// address).
	listen string
}

func newLab(t *testing.T) *lab {
	t.Helper()
	if !console.Built() {
		if testutil.Strict() {
			t.Fatal("the console's front-end files are missing: run scripts/build-ui.sh")
		}
		t.Skip("the console's front-end files are missing: run scripts/build-ui.sh")
	}
	dir := t.TempDir()
	l := &lab{t: t, dir: dir, vars: map[string]string{
		"COFFER_REPO": filepath.Join(dir, "repo"), "COFFER_PASSWORD": "repository password",
		"COFFER_CATALOG": filepath.Join(dir, "catalog.db"), "COFFER_CONFIG": filepath.Join(dir, "coffer.yaml"),
		"COFFER_STATE_DIR": filepath.Join(dir, "state"),
	}}
	l.config("")
	return l
}

// labServer lets the lab's administrator sign in with the password
// alone: the console's tests are of its pages, and a second factor would
// stand before each. account_test.go gives the lab a server section of
// its own, with the default.
const labServer = "server:\n  require-second-factor: []\n"

func (l *lab) config(doc string) {
	l.t.Helper()
	if !strings.Contains(doc, "server:") {
		doc = labServer + doc
	}
	if err := os.WriteFile(l.vars["COFFER_CONFIG"], []byte(doc), 0o600); err != nil {
		l.t.Fatal(err)
	}
}

// coffer runs a command in process, as an operator on the server's host.
func (l *lab) coffer(args ...string) string {
	l.t.Helper()
	for k, v := range l.vars {
		l.t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	if code := cli.Execute(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		l.t.Fatalf("coffer %v: exit %d\n%s%s", args, code, out.String(), errOut.String())
	}
	return out.String()
}

// ext4Image makes a disk image with an ext4 file system of files (path →
// content) and returns its path.
func (l *lab) ext4Image(name string, files map[string][]byte) string {
	l.t.Helper()
	mkfs := testutil.RequireBinary(l.t, "mkfs.ext4")
	root := filepath.Join(l.dir, name+"-root")
	for p, b := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			l.t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			l.t.Fatal(err)
		}
	}
	img := filepath.Join(l.dir, name+".raw")
	if out, err := exec.Command(mkfs, "-q", "-F", "-d", root, img, "16M").CombinedOutput(); err != nil {
		l.t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	return img
}

// serverProc is `coffer server` as a real process.
type serverProc struct {
	cmd        *exec.Cmd
	url        string
	setupToken string
	mu         sync.Mutex
	stderr     bytes.Buffer
	done       chan error
}

var (
	servingRE = regexp.MustCompile(`coffer server: serving (\S+)`)
	setupRE   = regexp.MustCompile(`/ui/setup#(coffersetup_[0-9a-f]{64})`)
	printRE   = regexp.MustCompile(`fingerprint ([0-9A-F:]{95})`)
)

// start starts the server (HTTPS with its self-signed certificate, as
// by default) on a free loopback port and waits until it serves.
func (l *lab) start() *serverProc {
	l.t.Helper()
	listen := l.listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	cmd := exec.Command(os.Args[0], "server", "--listen", listen, "--log-level", "info")
	cmd.Env = append(os.Environ(), "COFFER_TEST_AS_CLI=1")
	for k, v := range l.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	s := &serverProc{cmd: cmd, done: make(chan error, 1)}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		announced := false
		fingerprint := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			if m := setupRE.FindStringSubmatch(line); m != nil {
				s.setupToken = m[1]
			}
			if printRE.MatchString(line) {
				fingerprint = true
			}
			if m := servingRE.FindStringSubmatch(line); m != nil {
				s.url = m[1]
			}
			ready := s.url != "" && fingerprint
			s.mu.Unlock()
			if ready && !announced {
				announced = true
				close(serving)
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case <-serving:
	case err := <-s.done:
		l.t.Fatalf("the server exited before serving: %v\n%s", err, s.log())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		l.t.Fatalf("the server did not start:\n%s", s.log())
	}
	l.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-s.done
		}
		if l.t.Failed() {
			l.t.Logf("the server's log:\n%s", s.log())
		}
	})
	l.srv = s
	return s
}

func (s *serverProc) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// spki is the base64 SHA-256 of the server certificate's public key:
// Chromium trusts that one self-signed certificate and no other
// (--ignore-certificate-errors-spki-list), as a pinned client does.
func (l *lab) spki() string {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.vars["COFFER_STATE_DIR"], "server", "tls.crt"))
	if err != nil {
		l.t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		l.t.Fatal("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		l.t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/fingerprint"
	"github.com/coffer-backup/coffer/internal/server"
)

// serverProc is `coffer server` run as a real process by a test.
type serverProc struct {
	t           *testing.T
	cmd         *exec.Cmd
	url         string
	fingerprint string // "" with plain HTTP
	setupToken  string // at the first start
	mu          sync.Mutex
	stderr      bytes.Buffer // and stdout, as they came
	done        chan error
	exited      error
}

var (
	servingRE     = regexp.MustCompile(`coffer server: serving (\S+)`)
	fingerprintRE = regexp.MustCompile(`fingerprint ([0-9A-F:]{95})`)
	setupRE       = regexp.MustCompile(`/ui/setup#(coffersetup_[0-9a-f]{64})`)
)

// startServer starts `coffer server` on a free loopback port with the
// env's settings and waits until it serves.
func (e *env) startServer(args ...string) *serverProc {
	e.t.Helper()
	ready := func(s *serverProc) bool {
		return s.url != "" && (s.fingerprint != "" || strings.HasPrefix(s.url, "http://"))
	}
	return e.startCoffer(ready, 2*time.Minute, append([]string{"server", "--listen", "127.0.0.1:0", "--log-level", "info"}, args...)...)
}

// startCoffer starts coffer with args as a process that ends up serving
// (`coffer server`, `coffer demo --serve`) and waits, at most patience,
// until what it printed on stdout and stderr makes it ready.
func (e *env) startCoffer(ready func(*serverProc) bool, patience time.Duration, args ...string) *serverProc {
	e.t.Helper()
	if _, ok := e.vars["COFFER_STATE_DIR"]; !ok {
		e.vars["COFFER_STATE_DIR"] = filepath.Join(e.dir, "state")
	}
	cmd := e.child(args...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	s := &serverProc{t: e.t, cmd: cmd, done: make(chan error, 1)}
	serving := make(chan struct{})
	var once sync.Once
	var readers sync.WaitGroup
	scan := func(pipe io.Reader) {
		defer readers.Done()
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			if m := setupRE.FindStringSubmatch(line); m != nil {
				s.setupToken = m[1]
			}
			if m := fingerprintRE.FindStringSubmatch(line); m != nil {
				s.fingerprint = m[1]
			}
			if m := servingRE.FindStringSubmatch(line); m != nil {
				s.url = m[1]
			}
			now := ready(s)
			s.mu.Unlock()
			if now {
				once.Do(func() { close(serving) })
			}
		}
	}
	readers.Add(2)
	go scan(errPipe)
	go scan(outPipe)
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		s.done <- cmd.Wait()
	}()
	select {
	case <-serving:
	case err := <-s.done:
		e.t.Fatalf("coffer %v exited before serving: %v\n%s", args, err, s.log())
	case <-time.After(patience):
		_ = cmd.Process.Kill()
		e.t.Fatalf("coffer %v did not start serving:\n%s", args, s.log())
	}
	e.t.Cleanup(func() { s.stop() })
	return s
}

func (s *serverProc) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// stop sends SIGTERM and waits for the process to end; it returns how it
// ended.
func (s *serverProc) stop() error {
	if s.cmd.ProcessState == nil && s.exited == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case s.exited = <-s.done:
		case <-time.After(3 * time.Minute):
			_ = s.cmd.Process.Kill()
			s.exited = <-s.done
			s.t.Errorf("the server did not stop after SIGTERM:\n%s", s.log())
		}
		if s.exited == nil {
			s.exited = errors.New("exited 0") // remembered: stop is idempotent
			return nil
		}
	}
	if s.exited != nil && s.exited.Error() == "exited 0" {
		return nil
	}
	return s.exited
}

// client trusts the server's certificate by its fingerprint, as the
// remote command line does.
func (s *serverProc) client() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if fingerprint.Format(raw[0]) != s.fingerprint {
				return errors.New("not the pinned certificate")
			}
			return nil
		}}}}
}

// call sends a request to the API and decodes the answer into out.
func (s *serverProc) call(token, method, path string, body, out any) (int, http.Header) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+server.Prefix+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := s.client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %d %s: %v", method, path, res.StatusCode, b, err)
		}
	}
	if res.StatusCode >= 400 && out == nil {
		s.t.Logf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return res.StatusCode, res.Header
}

// adminToken makes the administrator's API token on the server's host, as
// an operator does after the first start.
func (e *env) adminToken() string {
	e.t.Helper()
	tok := strings.TrimSpace(e.must("token", "create", "--user", "admin", "--grant", "/=Admin", "--lifetime", "1d"))
	if !strings.HasPrefix(tok, "coffer_") {
		e.t.Fatalf("token create printed %q", tok)
	}
	return tok
}

// remote runs the command line against the server with a token.
func (e *env) remote(s *serverProc, token string, args ...string) (int, string, string) {
	e.t.Helper()
	saved := map[string]string{}
	for _, k := range []string{"COFFER_REPO", "COFFER_PASSWORD", "COFFER_CATALOG"} {
		saved[k] = e.vars[k]
		delete(e.vars, k)
		e.t.Setenv(k, "") // the operator's laptop has no repository
	}
	defer func() {
		for k, v := range saved {
			e.vars[k] = v
		}
	}()
	e.vars["COFFER_SERVER"], e.vars["COFFER_TOKEN"], e.vars["COFFER_SERVER_FINGERPRINT"] = s.url, token, s.fingerprint
	defer func() {
		for _, k := range []string{"COFFER_SERVER", "COFFER_TOKEN", "COFFER_SERVER_FINGERPRINT"} {
			delete(e.vars, k)
			e.t.Setenv(k, "")
		}
	}()
	return e.run(args...)
}

// TestServerFirstRunAndTLS starts the server on a fresh installation: it
// serves HTTPS with a self-signed ECDSA P-256 certificate made now (named
// for 127.0.0.1 and localhost) whose fingerprint it prints, creates the
// administrator and prints a one-time setup link; the link sets the
// password once, the password signs in, the session makes an API token.
// A client that pins another fingerprint, or trusts no certificate, is
// refused; a restart keeps the certificate and prints no new link.
func TestServerFirstRunAndTLS(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	s := e.startServer()
	if s.setupToken == "" || !strings.Contains(s.log(), "made now") {
		t.Fatalf("the first start printed no setup link or made no certificate:\n%s", s.log())
	}
	pemBytes, err := os.ReadFile(filepath.Join(e.vars["COFFER_STATE_DIR"], "server", "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Fatalf("the certificate's key is %T, want ECDSA P-256", cert.PublicKey)
	}
	if cert.VerifyHostname("127.0.0.1") != nil || cert.VerifyHostname("localhost") != nil {
		t.Fatalf("the certificate is not for 127.0.0.1 and localhost: %v %v", cert.IPAddresses, cert.DNSNames)
	}
	if fingerprint.Format(block.Bytes) != s.fingerprint {
		t.Fatalf("printed fingerprint %s is not the certificate's", s.fingerprint)
	}
	if fi, err := os.Stat(filepath.Join(e.vars["COFFER_STATE_DIR"], "server", "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi.Mode(), err)
	}

	// Without the pin the self-signed certificate is not trusted.
	if _, err := http.Get(s.url + "/healthz"); err == nil {
		t.Fatal("a client trusting only the system's roots accepted the self-signed certificate")
	}
	const pw = "a password of the first admin"
	var done api.SetupDone
	if code, _ := s.call("", "POST", "/access/setup", map[string]any{"token": s.setupToken, "password": pw}, &done); code != 200 || done.User != "admin" {
		t.Fatalf("setup: %d %+v", code, done)
	}
	if code, _ := s.call("", "POST", "/access/setup", map[string]any{"token": s.setupToken, "password": pw + "!"}, nil); code != 401 {
		t.Fatalf("the setup link worked twice: %d", code)
	}
	var sess api.Session
	code, h := s.call("", "POST", "/access/login", map[string]any{"user": "admin", "password": pw}, &sess)
	if code != 200 || sess.User != "admin" {
		t.Fatalf("login: %d %+v", code, sess)
	}
	cookie := (&http.Response{Header: h}).Cookies()[0]
	req, _ := http.NewRequest("POST", s.url+server.Prefix+"/access/tokens",
		strings.NewReader(`{"lifetime_seconds": 3600, "grants": [{"path": "/", "role": "Admin", "propagate": true}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(cookie)
	res, err := s.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var nt api.NewToken
	if err := json.NewDecoder(res.Body).Decode(&nt); err != nil || res.StatusCode != 201 {
		t.Fatalf("token from the session: %d %v", res.StatusCode, err)
	}
	res.Body.Close()
	var points []api.BackupPoint
	if code, _ := s.call(nt.Token, "GET", "/repositories/default/points", nil, &points); code != 200 || points == nil {
		t.Fatalf("points with the new token: %d", code)
	}

	// The remote command line pins the fingerprint; another pin, or none,
	// is refused with exit 3 and says why.
	if code, out, errOut := e.remote(s, nt.Token, "snapshots", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("remote snapshots: %d %s %s", code, out, errOut)
	}
	wrong := strings.Repeat("AB:", 31) + "AB"
	if code, _, errOut := e.remote(s, nt.Token, "snapshots", "--server-fingerprint", wrong); code != ExitAccess ||
		!strings.Contains(errOut, "fingerprint") {
		t.Fatalf("a wrong pin: %d %s", code, errOut)
	}
	unpinned := &serverProc{t: s.t, url: s.url} // no fingerprint
	if code, _, errOut := e.remote(unpinned, nt.Token, "snapshots"); code != ExitAccess || !strings.Contains(errOut, "--server-fingerprint") {
		t.Fatalf("no pin: %d %s", code, errOut)
	}

	// A restart keeps the certificate and sets nobody up again.
	if err := s.stop(); err != nil {
		t.Fatalf("the server after SIGTERM: %v\n%s", err, s.log())
	}
	again := e.startServer()
	if again.fingerprint != s.fingerprint || again.setupToken != "" || strings.Contains(again.log(), "made now") {
		t.Fatalf("the restart changed the certificate or set up again:\n%s", again.log())
	}
}

// TestServerInit: coffer server init makes the administrator and prints
// its link; once a password is set it refuses.
func TestServerInit(t *testing.T) {
	e := newEnv(t)
	var link api.SetupLink
	if err := json.Unmarshal([]byte(e.must("server", "init", "--admin", "root", "--json")), &link); err != nil ||
		link.User != "root" || !strings.HasPrefix(link.Token, "coffersetup_") || !strings.Contains(link.Link, "/ui/setup#"+link.Token) {
		t.Fatalf("server init: %+v %v", link, err)
	}
	e.must("user", "password", "root", "--new-password-file", writeFile(t, e.dir, "pw", "a root password here"))
	e.expect(ExitUsage, "server", "init")
}

func writeFile(t *testing.T, dir, name, content string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlainHTTPOnlyOnLoopback: --insecure-http on an address other hosts
// reach is refused with a message saying why; on 127.0.0.1 it serves.
func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	e := newEnv(t)
	e.vars["COFFER_STATE_DIR"] = filepath.Join(e.dir, "state")
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		out := e.expect(ExitUsage, "server", "--insecure-http", "--listen", listen)
		if !strings.Contains(out, "loopback address only") {
			t.Fatalf("--insecure-http on %s: %s", listen, out)
		}
	}
	s := e.startServer("--insecure-http")
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") {
		t.Fatalf("served %s", s.url)
	}
	res, err := http.Get(s.url + "/healthz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("healthz over plain HTTP: %v %v", res, err)
	}
	res.Body.Close()
}

// TestServerDrainsOnSIGTERM: SIGTERM lets a running request finish (a
// policy run the client waits for) and exits 0; with a drain timeout
// shorter than the run, the run is cancelled at the deadline, recorded as
// cancelled, its client gets its document with the cancelled class, and
// the server exits 0.
func TestServerDrainsOnSIGTERM(t *testing.T) {
	for _, c := range []struct {
		name, snapshot, drain, status, class string
	}{
		{"finishes", "3s", "5m", "success", ""},
		{"cancelled at the deadline", "10m", "1s", "cancelled", "cancelled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.must("init")
			e.config(`
connections:
  - {name: lab, kind: fake, options: {seed: 5, vms: 1, hosts: 1, datastores: 1, disk-size: 128KiB, snapshot-create: ` + c.snapshot + `}}
policies:
  - {name: slow, connection: lab}
server:
  drain-timeout: ` + c.drain + `
`)
			s := e.startServer()
			tok := e.adminToken()
			type answer struct {
				res *http.Response
				err error
				job api.Job
			}
			answered := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest("POST", s.url+server.Prefix+"/policies/slow/run?wait=true", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				var a answer
				if a.res, a.err = s.client().Do(req); a.err == nil {
					a.err = json.NewDecoder(a.res.Body).Decode(&a.job)
					a.res.Body.Close()
				}
				answered <- a
			}()
			e.waitJob(s, tok, "running")
			if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			a := <-answered
			if a.err != nil || a.res.StatusCode != 200 || a.job.Status != c.status || a.res.Header.Get(api.ErrorClassHeader) != c.class {
				t.Fatalf("the run's answer: %v %+v %+v\n%s", a.err, a.res, a.job, s.log())
			}
			if err := s.stop(); err != nil {
				t.Fatalf("the server after SIGTERM: %v\n%s", err, s.log())
			}
			var jobs []api.Job
			if err := json.Unmarshal([]byte(e.must("jobs", "--json")), &jobs); err != nil || len(jobs) != 1 || jobs[0].Status != c.status {
				t.Fatalf("jobs after the drain: %+v %v", jobs, err)
			}
		})
	}
}

// waitJob waits until the server lists a job with the status.
func (e *env) waitJob(s *serverProc, tok, status string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var jobs []api.Job
		if code, _ := s.call(tok, "GET", "/jobs?status="+status, nil, &jobs); code == 200 && len(jobs) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("no job became %s:\n%s", status, s.log())
		case <-tick.C:
		}
	}
}

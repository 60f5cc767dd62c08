package servercmd_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/fingerprint"
	"github.com/coffer-backup/coffer/internal/server"
)

// TestServerFirstRunAndTLS starts the server on a fresh installation: it
// serves HTTPS with a self-signed ECDSA P-256 certificate made now (named
// for 127.0.0.1 and localhost) whose fingerprint it prints, creates the
// administrator and prints a one-time setup link; the link sets the
// password once, the password signs in, the session makes an API token.
// A client that pins another fingerprint, or trusts no certificate, is
// refused; a restart keeps the certificate and prints no new link.
func TestServerFirstRunAndTLS(t *testing.T) {
	e := clitest.NewEnv(t)
	initPasswordOnly(e) // the session makes a token at once
	s := e.StartServer()
	if s.SetupToken == "" || !strings.Contains(s.Log(), "made now") {
		t.Fatalf("the first start printed no setup link or made no certificate:\n%s", s.Log())
	}
	pemBytes, err := os.ReadFile(filepath.Join(e.Vars["COFFER_STATE_DIR"], "server", "tls.crt"))
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
	if fingerprint.Format(block.Bytes) != s.Fingerprint {
		t.Fatalf("printed fingerprint %s is not the certificate's", s.Fingerprint)
	}
	if fi, err := os.Stat(filepath.Join(e.Vars["COFFER_STATE_DIR"], "server", "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi.Mode(), err)
	}

	// Without the pin the self-signed certificate is not trusted.
	if _, err := http.Get(s.URL + "/healthz"); err == nil {
		t.Fatal("a client trusting only the system's roots accepted the self-signed certificate")
	}
	const pw = "a password of the first admin"
	var done api.SetupDone
	if code, _ := s.Call("", "POST", "/access/setup", map[string]any{"token": s.SetupToken, "password": pw}, &done); code != 200 || done.User != "admin" {
		t.Fatalf("setup: %d %+v", code, done)
	}
	if code, _ := s.Call("", "POST", "/access/setup", map[string]any{"token": s.SetupToken, "password": pw + "!"}, nil); code != 401 {
		t.Fatalf("the setup link worked twice: %d", code)
	}
	var sess api.Session
	code, h := s.Call("", "POST", "/access/login", map[string]any{"user": "admin", "password": pw}, &sess)
	if code != 200 || sess.User != "admin" {
		t.Fatalf("login: %d %+v", code, sess)
	}
	cookie := (&http.Response{Header: h}).Cookies()[0]
	req, _ := http.NewRequest("POST", s.URL+server.Prefix+"/access/tokens",
		strings.NewReader(`{"lifetime_seconds": 3600, "grants": [{"path": "/", "role": "Admin", "propagate": true}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(cookie)
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var nt api.NewToken
	if err := json.NewDecoder(res.Body).Decode(&nt); err != nil || res.StatusCode != 201 {
		t.Fatalf("token from the session: %d %v", res.StatusCode, err)
	}
	res.Body.Close()
	var points []api.BackupPoint
	if code, _ := s.Call(nt.Token, "GET", "/repositories/default/points", nil, &points); code != 200 || points == nil {
		t.Fatalf("points with the new token: %d", code)
	}
	checkServedMetrics(t, s, nt.Token, cert)

	// The remote command line pins the fingerprint; another pin, or none,
	// is refused with exit 3 and says why.
	if code, out, errOut := e.Remote(s, nt.Token, "snapshots", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("remote snapshots: %d %s %s", code, out, errOut)
	}
	wrong := strings.Repeat("AB:", 31) + "AB"
	if code, _, errOut := e.Remote(s, nt.Token, "snapshots", "--server-fingerprint", wrong); code != command.ExitAccess ||
		!strings.Contains(errOut, "fingerprint") {
		t.Fatalf("a wrong pin: %d %s", code, errOut)
	}
	unpinned := &clitest.ServerProc{T: s.T, URL: s.URL} // no fingerprint
	if code, _, errOut := e.Remote(unpinned, nt.Token, "snapshots"); code != command.ExitAccess || !strings.Contains(errOut, "--server-fingerprint") {
		t.Fatalf("no pin: %d %s", code, errOut)
	}

	// A restart keeps the certificate and sets nobody up again.
	if err := s.Stop(); err != nil {
		t.Fatalf("the server after SIGTERM: %v\n%s", err, s.Log())
	}
	again := e.StartServer()
	if again.Fingerprint != s.Fingerprint || again.SetupToken != "" || strings.Contains(again.Log(), "made now") {
		t.Fatalf("the restart changed the certificate or set up again:\n%s", again.Log())
	}
}

// checkServedMetrics: the metrics say when the served certificate ends,
// and which coffer serves them.
func checkServedMetrics(t *testing.T, s *clitest.ServerProc, token string, cert *x509.Certificate) {
	t.Helper()
	text := s.Metrics(token)
	m := regexp.MustCompile(`(?m)^coffer_tls_certificate_expiry_timestamp_seconds (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no certificate expiry in the metrics:\n%s", text)
	}
	if got, err := strconv.ParseFloat(m[1], 64); err != nil || int64(got) != cert.NotAfter.Unix() {
		t.Fatalf("certificate expiry %s, want %d (the certificate's NotAfter)", m[1], cert.NotAfter.Unix())
	}
	if !strings.Contains(text, "coffer_build_info{") {
		t.Fatalf("no coffer_build_info in the metrics")
	}
}

// TestServerInit: coffer server init makes the administrator and prints
// its link; once a password is set it refuses.
func TestServerInit(t *testing.T) {
	e := clitest.NewEnv(t)
	var link api.SetupLink
	if err := json.Unmarshal([]byte(e.Must("server", "init", "--admin", "root", "--json")), &link); err != nil ||
		link.User != "root" || !strings.HasPrefix(link.Token, "coffersetup_") || !strings.Contains(link.Link, "/ui/setup#"+link.Token) {
		t.Fatalf("server init: %+v %v", link, err)
	}
	e.Must("user", "password", "root", "--new-password-file", writeFile(t, e.Dir, "pw", "a root password here"))
	e.Expect(command.ExitUsage, "server", "init")
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
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		out := e.Expect(command.ExitUsage, "server", "--insecure-http", "--listen", listen)
		if !strings.Contains(out, "loopback address only") {
			t.Fatalf("--insecure-http on %s: %s", listen, out)
		}
	}
	s := e.StartServer("--insecure-http")
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("served %s", s.URL)
	}
	res, err := http.Get(s.URL + "/healthz")
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
			e := clitest.NewEnv(t)
			e.Must("init")
			e.Config(`
connections:
  - {name: lab, kind: fake, options: {seed: 5, vms: 1, hosts: 1, datastores: 1, disk-size: 128KiB, snapshot-create: ` + c.snapshot + `}}
policies:
  - {name: slow, connection: lab}
server:
  drain-timeout: ` + c.drain + `
`)
			s := e.StartServer()
			tok := e.AdminToken()
			type answer struct {
				res *http.Response
				err error
				job api.Job
			}
			answered := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest("POST", s.URL+server.Prefix+"/policies/slow/run?wait=true", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				var a answer
				if a.res, a.err = s.Client().Do(req); a.err == nil {
					a.err = json.NewDecoder(a.res.Body).Decode(&a.job)
					a.res.Body.Close()
				}
				answered <- a
			}()
			waitJob(e, s, tok, "running")
			if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			a := <-answered
			if a.err != nil || a.res.StatusCode != 200 || a.job.Status != c.status || a.res.Header.Get(api.ErrorClassHeader) != c.class {
				t.Fatalf("the run's answer: %v %+v %+v\n%s", a.err, a.res, a.job, s.Log())
			}
			if err := s.Stop(); err != nil {
				t.Fatalf("the server after SIGTERM: %v\n%s", err, s.Log())
			}
			var jobs []api.Job
			if err := json.Unmarshal([]byte(e.Must("jobs", "--json")), &jobs); err != nil || len(jobs) != 1 || jobs[0].Status != c.status {
				t.Fatalf("jobs after the drain: %+v %v", jobs, err)
			}
		})
	}
}

// waitJob waits until the server lists a job with the status.
func waitJob(e *clitest.Env, s *clitest.ServerProc, tok, status string) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var jobs []api.Job
		if code, _ := s.Call(tok, "GET", "/jobs?status="+status, nil, &jobs); code == 200 && len(jobs) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			e.T.Fatalf("no job became %s:\n%s", status, s.Log())
		case <-tick.C:
		}
	}
}

package clitest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

var (
	servingRE     = regexp.MustCompile(`coffer server: serving (\S+)`)
	fingerprintRE = regexp.MustCompile(`fingerprint ([0-9A-F:]{95})`)
	setupRE       = regexp.MustCompile(`/ui/setup#(coffersetup_[0-9a-f]{64})`)
)

// StartServer starts `coffer server` on a free loopback port with the
// env's settings and waits until it serves.
func (e *Env) StartServer(args ...string) *ServerProc {
	e.T.Helper()
	ready := func(s *ServerProc) bool {
		return s.URL != "" && (s.Fingerprint != "" || strings.HasPrefix(s.URL, "http://"))
	}
	return e.StartCoffer(ready, 2*time.Minute, append([]string{"server", "--listen", "127.0.0.1:0", "--log-level", "info"}, args...)...)
}

// StartCoffer starts coffer with args as a process that ends up serving
// (`coffer server`, `coffer demo --serve`) and waits, at most patience,
// until what it printed on stdout and stderr makes it ready.
func (e *Env) StartCoffer(ready func(*ServerProc) bool, patience time.Duration, args ...string) *ServerProc {
	e.T.Helper()
	if _, ok := e.Vars["COFFER_STATE_DIR"]; !ok {
		e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	}
	cmd := e.Child(args...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		e.T.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		e.T.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	s := &ServerProc{T: e.T, Cmd: cmd, Done: make(chan error, 1)}
	serving := make(chan struct{})
	var once sync.Once
	var readers sync.WaitGroup
	scan := func(pipe io.Reader) {
		defer readers.Done()
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.Stderr.WriteString(line + "\n")
			if m := setupRE.FindStringSubmatch(line); m != nil {
				s.SetupToken = m[1]
			}
			if m := fingerprintRE.FindStringSubmatch(line); m != nil {
				s.Fingerprint = m[1]
			}
			if m := servingRE.FindStringSubmatch(line); m != nil {
				s.URL = m[1]
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
		s.Done <- cmd.Wait()
	}()
	select {
	case <-serving:
	case err := <-s.Done:
		e.T.Fatalf("coffer %v exited before serving: %v\n%s", args, err, s.Log())
	case <-time.After(patience):
		dump := s.Goroutines() // where it hangs
		_ = cmd.Process.Kill()
		e.T.Fatalf("coffer %v did not start serving:\n%s", args, dump)
	}
	e.T.Cleanup(func() { _ = s.Stop() }) // a test that cared stopped it itself
	return s
}

// Log is what the server printed so far.
func (s *ServerProc) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Stderr.String()
}

// Goroutines ends the process with SIGQUIT, which makes Go's runtime print
// every goroutine's stack, and returns its log with them: a diagnosis of a
// process that hangs (one stopped with SIGSTOP prints nothing until woken).
func (s *ServerProc) Goroutines() string {
	if s.Cmd.ProcessState == nil && s.exited == nil {
		_ = s.Cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case s.exited = <-s.Done:
		case <-time.After(30 * time.Second):
			return s.Log() + "\n(no goroutine dump within 30 s of SIGQUIT)"
		}
	}
	return s.Log()
}

// Stop sends SIGTERM and waits for the process to end; it returns how it
// ended.
func (s *ServerProc) Stop() error {
	if s.Cmd.ProcessState == nil && s.exited == nil {
		_ = s.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case s.exited = <-s.Done:
		case <-time.After(3 * time.Minute):
			_ = s.Cmd.Process.Kill()
			s.exited = <-s.Done
			s.T.Errorf("the server did not stop after SIGTERM:\n%s", s.Log())
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

// Client trusts the server's certificate by its fingerprint, as the
// remote command line does.
func (s *ServerProc) Client() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if fingerprint.Format(raw[0]) != s.Fingerprint {
				return errors.New("not the pinned certificate")
			}
			return nil
		}}}}
}

// Call sends a request to the API and decodes the answer into out.
func (s *ServerProc) Call(token, method, path string, body, out any) (int, http.Header) {
	s.T.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+server.Prefix+path, rd)
	if err != nil {
		s.T.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := s.Client().Do(req)
	if err != nil {
		s.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			s.T.Fatalf("%s %s: %d %s: %v", method, path, res.StatusCode, b, err)
		}
	}
	if res.StatusCode >= 400 && out == nil {
		s.T.Logf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return res.StatusCode, res.Header
}

// AdminToken makes the administrator's API token on the server's host, as
// an operator does after the first start.
func (e *Env) AdminToken() string {
	e.T.Helper()
	tok := strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/=Admin", "--lifetime", "1d"))
	if !strings.HasPrefix(tok, "coffer_") {
		e.T.Fatalf("token create printed %q", tok)
	}
	return tok
}

// Remote runs the command line against the server with a token.
func (e *Env) Remote(s *ServerProc, token string, args ...string) (int, string, string) {
	e.T.Helper()
	saved := map[string]string{}
	for _, k := range []string{"COFFER_REPO", "COFFER_PASSWORD", "COFFER_CATALOG"} {
		saved[k] = e.Vars[k]
		delete(e.Vars, k)
		e.T.Setenv(k, "") // the operator's laptop has no repository
	}
	defer func() {
		for k, v := range saved {
			e.Vars[k] = v
		}
	}()
	e.Vars["COFFER_SERVER"], e.Vars["COFFER_TOKEN"], e.Vars["COFFER_SERVER_FINGERPRINT"] = s.URL, token, s.Fingerprint
	defer func() {
		for _, k := range []string{"COFFER_SERVER", "COFFER_TOKEN", "COFFER_SERVER_FINGERPRINT"} {
			delete(e.Vars, k)
			e.T.Setenv(k, "")
		}
	}()
	return e.Run(args...)
}

// Metrics is the server's /metrics text.
func (s *ServerProc) Metrics(token string) string {
	s.T.Helper()
	req, err := http.NewRequest("GET", s.URL+"/metrics", nil)
	if err != nil {
		s.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := s.Client().Do(req)
	if err != nil {
		s.T.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		s.T.Fatalf("/metrics: %d %v\n%s", res.StatusCode, err, b)
	}
	return string(b)
}

// ServerProc is `coffer server` run as a real process by a test.
type ServerProc struct {
	T           *testing.T
	Cmd         *exec.Cmd
	URL         string
	Fingerprint string // "" with plain HTTP
	SetupToken  string // at the first start
	mu          sync.Mutex
	Stderr      bytes.Buffer // and stdout, as they came
	Done        chan error
	exited      error
}

// RunPolicyDeadline bounds RunPolicy's wait for the job: a run that hangs
// ends the test with the server's log, not at go test's timeout with
// nothing but goroutines.
const RunPolicyDeadline = 10 * time.Minute

// RunPolicy runs policy through the server's API and waits for its job.
// It may run in a goroutine (it fails no test): what went wrong, the
// request included, is in the job's Error.
func (s *ServerProc) RunPolicy(token, policy string) api.Job {
	var j api.Job
	ctx, cancel := context.WithTimeout(context.Background(), RunPolicyDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+server.Prefix+"/policies/"+policy+"/run?wait=true", nil)
	if err != nil {
		j.Error = err.Error()
		return j
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := s.Client().Do(req)
	if err != nil {
		j.Error = fmt.Sprintf("run %s, waiting at most %s: %v", policy, RunPolicyDeadline, err)
		return j
	}
	defer func() { _ = res.Body.Close() }()
	if err := json.NewDecoder(res.Body).Decode(&j); err != nil {
		j.Error = fmt.Sprintf("%d: %v", res.StatusCode, err)
	}
	return j
}

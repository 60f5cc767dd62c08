package notify

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// env is a catalog file, the notifiers a test starts on it, and what they
// report: tests wait on recorded attempts, never on time.
type env struct {
	t        *testing.T
	dir      string
	catPath  string
	cat      catalog.Catalog
	attempts chan Attempt
	logs     *syncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, catPath: filepath.Join(dir, "catalog.db"), attempts: make(chan Attempt, 100),
		logs: &syncBuffer{}}
	e.cat = e.openCatalog()
	return e
}

func (e *env) openCatalog() catalog.Catalog {
	e.t.Helper()
	c, err := sqlite.Open(context.Background(), e.catPath, sqlite.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// fast is a delivery setting for tests: retries follow each other within
// a fraction of a second.
var fast = Delivery{Attempts: 50, Backoff: Duration(20 * time.Millisecond), MaxBackoff: Duration(100 * time.Millisecond),
	Timeout: Duration(10 * time.Second)}

// start starts a notifier on the env's catalog (or cat) and stops it when
// the test ends.
func (e *env) start(cfg *Config, cat ...catalog.Catalog) *Notifier {
	e.t.Helper()
	store := e.cat
	if len(cat) > 0 {
		store = cat[0]
	}
	n, err := New(cfg, store, Options{Observe: func(a Attempt) { e.attempts <- a },
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Start(context.Background())
	e.t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// waitAttempt returns the next recorded attempt that satisfies ok. The
// deadline only ends a test that hangs.
func (e *env) waitAttempt(what string, ok func(Attempt) bool) Attempt {
	e.t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case a := <-e.attempts:
			if ok(a) {
				return a
			}
		case <-deadline:
			e.t.Fatalf("no attempt: %s", what)
		}
	}
}

// waitDelivered waits until n deliveries were recorded delivered and
// returns their records.
func (e *env) waitDelivered(n int) []catalog.Delivery {
	e.t.Helper()
	var out []catalog.Delivery
	for range n {
		a := e.waitAttempt("delivered", func(a Attempt) bool { return a.Status == catalog.DeliveryDelivered })
		out = append(out, e.delivery(a.Delivery))
	}
	return out
}

func (e *env) delivery(id int64) catalog.Delivery {
	e.t.Helper()
	d, err := e.cat.GetDelivery(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) deliveries(f catalog.DeliveryFilter) []catalog.Delivery {
	e.t.Helper()
	ds, err := e.cat.ListDeliveries(context.Background(), f)
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

func (e *env) emit(n *Notifier, ev Event) {
	e.t.Helper()
	if err := n.Emit(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
}

// file writes a file only its owner reads (secrets, CAs).
func (e *env) file(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// smtp starts a test SMTP server with STARTTLS and AUTH and returns it
// with a target configured for it.
func (e *env) smtp(name string) (*testutil.SMTPServer, Target) {
	e.t.Helper()
	tlsFiles := testutil.NewTLSFiles(e.t, e.dir)
	pw := e.file(name+".pw", "s3cret-"+name+"\n")
	srv := testutil.StartSMTP(e.t, testutil.SMTPOptions{TLS: "starttls", Cert: tlsFiles.Cert, Key: tlsFiles.Key,
		User: "coffer", PasswordFile: pw})
	return srv, Target{Name: name, SMTP: &SMTPTarget{Host: srv.Host, Port: srv.Port, CAFile: tlsFiles.CA,
		Username: "coffer", PasswordFile: pw, From: "coffer@example.com", To: []string{"ops@example.com"}}}
}

// receiver is a webhook receiver: the peer of the code under test.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	statuses []int // answered in turn, the last one repeated
	got      []request
	arrived  chan request
	hold     chan struct{} // when set, requests wait for it to close
}

type request struct {
	header http.Header
	body   []byte
}

// newReceiver starts an HTTPS receiver answering statuses in turn (200
// when none) and returns it with a target for it, whose CA file trusts it.
func (e *env) newReceiver(name string, statuses ...int) (*receiver, Target) {
	e.t.Helper()
	r := &receiver{statuses: statuses, arrived: make(chan request, 100)}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes a test fails on purpose
	r.srv.StartTLS()
	e.t.Cleanup(r.srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	return r, Target{Name: name, Webhook: &WebhookTarget{URL: r.srv.URL + "/hook/" + name,
		CAFile: e.file(name+"-ca.pem", string(ca))}}
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	got := request{header: req.Header.Clone(), body: body}
	r.mu.Lock()
	r.got = append(r.got, got)
	status := http.StatusOK
	if len(r.statuses) > 0 {
		status = r.statuses[0]
		if len(r.statuses) > 1 {
			r.statuses = r.statuses[1:]
		}
	}
	hold := r.hold
	r.mu.Unlock()
	r.arrived <- got
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte("status " + strconv.Itoa(status)))
}

// setHold makes requests wait for hold to close (nil: answer at once).
func (r *receiver) setHold(hold chan struct{}) {
	r.mu.Lock()
	r.hold = hold
	r.mu.Unlock()
}

func (r *receiver) setStatuses(s ...int) {
	r.mu.Lock()
	r.statuses = s
	r.mu.Unlock()
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

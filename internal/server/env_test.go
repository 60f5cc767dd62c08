package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.RunOIDCProviderIfAsked()
	servicetest.RegisterFake()
	os.Exit(m.Run())
}

// env is a server over a real repository (a local directory) with backup
// points of a simulated fleet and of a disk image, a real catalog (SQLite,
// or PostgreSQL), and one user per role, each with an API token holding
// its role: the handler the tests send requests to, in process.
type env struct {
	t       testing.TB
	dir     string
	svc     *service.Service
	access  *auth.Service
	cat     catalog.Catalog
	srv     *Server
	http    *httptest.Server
	logs    *syncBuffer
	clock   *clock
	tokens  map[string]string // by user
	points  []api.BackupPoint
	catalog string
}

// roles are the test's users: one per role, with its role on /, and the
// tenant, a RestoreOperator of one VM.
var roles = map[string]auth.Role{
	"admin": auth.RoleAdmin, "auditor": auth.RoleAuditor, "backupop": auth.RoleBackupOperator,
	"restoreop": auth.RoleRestoreOperator, "repoadmin": auth.RoleRepositoryAdmin, "editor": auth.RolePolicyEditor,
	"nobody": auth.RoleNoAccess,
}

const (
	tenant   = "tenant"
	tenantVM = "web-0000"
	adminPW  = "correct horse battery staple"
)

// clock is the access control's clock, moved by the tests (token expiry).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

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

const fleetConfig = `
connections:
  - {name: lab, kind: fake, options: {seed: 3, vms: 2, hosts: 1, datastores: 1, disk-size: 256KiB}}
policies:
  - {name: nightly, connection: lab, retention: {keep-last: 5}}
`

// newEnv builds the environment; catalogLoc "" is a SQLite file.
func newEnv(t testing.TB, catalogLoc string) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	// Registered first, so it runs after the server, its tasks and the
	// service have stopped: nothing of the repository is left open (a
	// store some call never closed would leak a descriptor per call).
	t.Cleanup(func() {
		if held := testutil.OwnFilesUnder(filepath.Join(dir, "repo")); len(held) > 0 {
			t.Errorf("left open after the server stopped: %s", strings.Join(held, "; "))
		}
	})
	if catalogLoc == "" {
		catalogLoc = filepath.Join(dir, "catalog.db")
	}
	f, err := config.Parse([]byte(fleetConfig))
	if err != nil {
		t.Fatal(err)
	}
	engine, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalogopen.Open(ctx, catalogLoc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	clk := &clock{now: time.Now()}
	access, err := auth.New(cat, auth.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	bg := service.NewBackground(ctx)
	t.Cleanup(func() { bg.Drain(ctx) })
	for _, d := range []string{"restores", "images", "exports"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	pw := []byte("repository password")
	svc := operations.New(service.Config{
		Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: func() ([]byte, error) { return pw, nil }},
		Catalog:    catalogLoc, StateDir: filepath.Join(dir, "state"), Engine: engine, Logger: log,
		Access: access, Background: bg,
		Files: service.FileRoots{RestoreDir: filepath.Join(dir, "restores"), ImageDir: filepath.Join(dir, "images"),
			ExportDir: filepath.Join(dir, "exports")},
	})
	// Its tasks are recorded by its own task manager, as the server's are.
	if err := svc.Start(ctx, service.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	e := &env{t: t, dir: dir, svc: svc, access: access, cat: cat, logs: logs, clock: clk, tokens: map[string]string{}, catalog: catalogLoc}
	e.seed(ctx, pw)
	e.srv = New(Config{Service: svc, Access: access, Logger: log, Metrics: metrics.New().Handler()})
	e.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(e.http.Close)
	return e
}

// seed makes the repository, its points, the users and their tokens.
func (e *env) seed(ctx context.Context, pw []byte) {
	t := e.t
	local := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(e.dir, "repo"),
		Password: func() ([]byte, error) { return pw, nil }}, Catalog: e.catalog, StateDir: filepath.Join(e.dir, "state"),
		Engine: mustEngine(t), Local: true, Logger: slog.New(slog.DiscardHandler)})
	if _, err := (repoops.Ops{Service: local}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: pw}); err != nil {
		t.Fatal(err)
	}
	run, err := local.RunPolicy(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if j, err := run.Wait(); err != nil || j.Status != "success" {
		t.Fatalf("policy run: %+v %v", j, err)
	}
	img := e.ext4Image()
	if _, err := (backupops.Ops{Service: local}).BackupDisk(ctx, &api.BackupDiskInput{Body: api.BackupDiskRequest{Paths: []string{img}, Name: "disk"}}); err != nil {
		t.Fatal(err)
	}
	if e.points, _, err = (repoops.Ops{Service: local}).RepositoryPoints(ctx, &api.ListPointsInput{}); err != nil || len(e.points) != 3 {
		t.Fatalf("points: %d %v", len(e.points), err)
	}
	// The first administrator, as the first start makes it.
	setup, err := e.access.Bootstrap(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.access.CompleteSetup(ctx, setup, adminPW, "test"); err != nil {
		t.Fatal(err)
	}
	lo := auth.Local()
	for user, role := range roles {
		if user != "admin" {
			if _, err := e.access.CreateUser(ctx, lo, auth.NewUser{Name: user, Password: user + " password here"}); err != nil {
				t.Fatal(err)
			}
			if err := e.access.SetACL(ctx, lo, auth.ACLChange{Path: "/", User: user, Role: role, Propagate: true}); err != nil {
				t.Fatal(err)
			}
		}
		e.tokens[user] = e.token(user, auth.Grant{Path: "/", Role: role, Propagate: true})
	}
	if _, err := e.access.CreateUser(ctx, lo, auth.NewUser{Name: tenant, Password: "tenant password here"}); err != nil {
		t.Fatal(err)
	}
	vm := auth.VMPath("lab", tenantVM)
	if err := e.access.SetACL(ctx, lo, auth.ACLChange{Path: vm, User: tenant, Role: auth.RoleRestoreOperator, Propagate: true}); err != nil {
		t.Fatal(err)
	}
	e.tokens[tenant] = e.token(tenant, auth.Grant{Path: vm, Role: auth.RoleRestoreOperator, Propagate: true})
}

// motd is a file of the disk image's file system.
const motd = "served by coffer's API\n"

// ext4Image makes a disk image holding an ext4 file system with /etc/motd
// and some random data, in the image directory.
func (e *env) ext4Image() string {
	t := e.t
	mkfs := testutil.RequireBinary(t, "mkfs.ext4")
	root := filepath.Join(e.dir, "fs")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256<<10)
	_, _ = rand.Read(data)
	for name, b := range map[string][]byte{"etc/motd": []byte(motd), "data.bin": data} {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(e.dir, "images", "disk.raw")
	if out, err := exec.Command(mkfs, "-q", "-F", "-d", root, img, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	return img
}

func mustEngine(t testing.TB) *policy.Config {
	f, err := config.Parse([]byte(fleetConfig))
	if err != nil {
		t.Fatal(err)
	}
	c, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// token creates an API token of user with grants, as the local
// administrator does.
func (e *env) token(user string, grants ...auth.Grant) string {
	e.t.Helper()
	nt, err := e.access.CreateToken(context.Background(), auth.Local(), auth.TokenRequest{User: user, Lifetime: time.Hour, Grants: grants})
	if err != nil {
		e.t.Fatal(err)
	}
	return nt.Token
}

// point returns a point of the simulated VM vm, or of the disk image.
func (e *env) point(vm string) api.BackupPoint {
	for _, p := range e.points {
		if p.VM == vm {
			return p
		}
	}
	e.t.Fatalf("no point of %s", vm)
	return api.BackupPoint{}
}

// response is an answer, its body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", r.status, err, r.body)
	}
}

// problem checks an answer is a problem of the status and class, with a
// message, and returns its detail.
func (r response) problem(t *testing.T, status int, class api.Class) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json: %s", ct, r.body)
	}
	var p ProblemDetails
	r.json(t, &p)
	if p.Class != class || p.Status != status || p.Detail == "" {
		t.Fatalf("problem %+v, want class %s and a message", p, class)
	}
	return p.Detail
}

// do sends a request with a token ("" none); body is JSON unless it is
// a string, sent as it is.
func (e *env) do(token, method, path string, body any) response {
	e.t.Helper()
	return e.doWith(token, method, path, body, nil)
}

// doWith is do with more headers.
func (e *env) doWith(token, method, path string, body any, header http.Header) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails, it does not block the suite
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.http.URL+Prefix+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// audit returns the audit log, newest first.
func (e *env) audit() []catalog.AuditRecord {
	e.t.Helper()
	rs, err := e.access.QueryAudit(context.Background(), auth.Local(), catalog.AuditFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func jsonDecode(res *http.Response, v any) error {
	defer res.Body.Close()
	return json.NewDecoder(res.Body).Decode(v)
}

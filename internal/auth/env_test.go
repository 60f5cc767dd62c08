package auth

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// clock is the injected time: tests move it, nothing sleeps.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is an access-control service over a real catalog.
type env struct {
	t     *testing.T
	open  func(ctx context.Context) (catalog.Catalog, error)
	cat   catalog.Catalog
	svc   *Service
	clock *clock
	opts  Options
}

// freshDB returns the opener of a new, empty catalog: a SQLite file by
// default, a PostgreSQL schema while TestOnPostgres runs the tests again.
// Each call of the opener opens another handle to the same database, as
// another process or server would.
var freshDB = func(t *testing.T) func(context.Context) (catalog.Catalog, error) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	return func(ctx context.Context) (catalog.Catalog, error) { return sqlite.Open(ctx, path, sqlite.Options{}) }
}

// newEnv starts a service over a fresh catalog.
func newEnv(t *testing.T, o Options) *env { return newEnvOn(t, freshDB(t), o) }

func newEnvOn(t *testing.T, open func(context.Context) (catalog.Catalog, error), o Options) *env {
	t.Helper()
	e := &env{t: t, open: open, clock: newClock(), opts: o}
	e.start()
	return e
}

// start opens the catalog and a service over it.
func (e *env) start() {
	e.t.Helper()
	cat, err := e.open(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cat.Close() })
	o := e.opts
	o.Now = e.clock.Now
	svc, err := New(cat, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.cat, e.svc = cat, svc
}

// restart closes the catalog and starts again: a server restart.
func (e *env) restart() {
	e.t.Helper()
	if err := e.cat.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.start()
}

const adminPassword = "correct horse battery staple"

// setUp runs the first-run setup for "admin" and signs in; it returns
// the admin's subject.
func (e *env) setUp() *Subject {
	e.t.Helper()
	ctx := context.Background()
	link, err := e.svc.Bootstrap(ctx, "admin")
	must(e.t, err)
	_, err = e.svc.CompleteSetup(ctx, link, adminPassword, "192.0.2.1")
	must(e.t, err)
	ns, err := e.svc.Login(ctx, LoginRequest{User: "admin", Password: adminPassword, RemoteAddr: "192.0.2.1"})
	must(e.t, err)
	return ns.Subject
}

// addUser creates a user with a password and the given grants.
func (e *env) addUser(admin *Subject, name, password string, grants ...Grant) {
	e.t.Helper()
	ctx := context.Background()
	_, err := e.svc.CreateUser(ctx, admin, NewUser{Name: name, Password: password})
	must(e.t, err)
	for _, g := range grants {
		must(e.t, e.svc.SetACL(ctx, admin, ACLChange{Path: g.Path, User: name, Role: g.Role, Propagate: g.Propagate}))
	}
}

// login signs a user in.
func (e *env) login(name, password string) (*NewSession, error) {
	return e.svc.Login(context.Background(), LoginRequest{User: name, Password: password, RemoteAddr: "198.51.100.7"})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantClass fails unless err is of class want (ErrDenied...).
func wantClass(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want an error of class %v", what, err, want)
	}
}

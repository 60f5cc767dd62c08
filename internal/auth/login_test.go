package auth

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/passhash"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func TestLogin(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase", Grant{Path: "/policies", Role: RoleBackupOperator, Propagate: true})
	ns, err := e.login("Alice", "alice's pass phrase") // names are matched in lower case
	must(t, err)
	if ns.User != "alice" || len(ns.Cookie) != 64 || !ns.ExpiresAt.Equal(e.clock.Now().Add(DefaultSessionLifetime)) {
		t.Fatalf("session %+v", ns)
	}
	if !Allowed(ns.Subject, "/policies/nightly", PolicyRun) || Allowed(ns.Subject, "/policies/nightly", PolicyModify) {
		t.Fatalf("alice's rights: %s", ns.Subject.Privileges("/policies/nightly"))
	}
	u, err := e.cat.GetUser(context.Background(), "alice")
	must(t, err)
	if !u.LastLoginAt.Equal(e.clock.Now()) {
		t.Fatalf("last login %s, now %s", u.LastLoginAt, e.clock.Now())
	}
	// The session authenticates requests.
	s, err := e.svc.AuthenticateSession(context.Background(), ns.Cookie)
	must(t, err)
	if s.User != "alice" || s.TokenID != "" || !Allowed(s, "/policies/p", PolicyRun) {
		t.Fatalf("session subject %+v", s)
	}
}

// Every failed sign-in gets the same answer after the same work: an
// unknown user, a wrong password, a disabled user and a user whose setup
// is pending cannot be told apart.
func TestFailedLoginsLookAlike(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	ctx := context.Background()
	e.addUser(admin, "alice", "alice's pass phrase")
	e.addUser(admin, "bob", "bob's pass phrase!")
	must(t, e.svc.SetUserEnabled(ctx, admin, "bob", false, ""))
	_, err := e.svc.CreateUser(ctx, admin, NewUser{Name: "carol"}) // no password yet
	must(t, err)

	var messages []string
	for i, c := range []struct{ user, password string }{
		{"nobody", "some pass phrase"},
		{"alice", "not alice's pass phrase"},
		{"bob", "bob's pass phrase!"}, // right password, disabled user
		{"carol", ""},
		{"carol", "any pass phrase at all"},
		{"", ""},
		{strings.Repeat("x", 5000), "long name"},
	} {
		before := passhash.Verifications()
		_, err := e.svc.Login(ctx, LoginRequest{User: c.user, Password: c.password, RemoteAddr: fmt.Sprintf("192.0.2.%d", 10+i)})
		if got := passhash.Verifications() - before; got != 1 {
			t.Errorf("sign-in as %.20q ran argon2id %d times, want once", c.user, got)
		}
		wantClass(t, "failed sign-in", err, ErrUnauthenticated)
		messages = append(messages, err.Error())
	}
	for _, m := range messages[1:] {
		if m != messages[0] {
			t.Fatalf("failed sign-ins answer differently: %q", messages)
		}
	}
}

func TestUserLockoutAndBackoff(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase")
	ctx := context.Background()
	attempt := func(password, addr string) error {
		_, err := e.svc.Login(ctx, LoginRequest{User: "alice", Password: password, RemoteAddr: addr})
		return err
	}
	// Five failures from five addresses (so that only the user counts).
	for i := range DefaultUserThrottle.Free {
		wantClass(t, "wrong password", attempt("wrong guess", fmt.Sprintf("203.0.113.%d", i)), ErrUnauthenticated)
	}
	// Locked: even the right password is refused, with the time to retry.
	err := attempt("alice's pass phrase", "203.0.113.99")
	var locked *LockedError
	if !errors.As(err, &locked) || locked.Address || !errors.Is(err, ErrLocked) {
		t.Fatalf("sixth attempt: %v", err)
	}
	want := e.clock.Now().Add(DefaultUserThrottle.Base)
	if !locked.Until.Equal(want) || locked.RetryAfter() != DefaultUserThrottle.Base ||
		!strings.Contains(err.Error(), want.Format(time.RFC3339)) || !strings.Contains(err.Error(), "for this user") {
		t.Fatalf("lock message %q (until %s), want until %s", err, locked.Until, want)
	}
	// The lock ends on time; the next failure locks twice as long.
	e.clock.Advance(DefaultUserThrottle.Base)
	wantClass(t, "after the lock", attempt("wrong again", "203.0.113.98"), ErrUnauthenticated)
	err = attempt("alice's pass phrase", "203.0.113.97")
	if !errors.As(err, &locked) || !locked.Until.Equal(e.clock.Now().Add(2*DefaultUserThrottle.Base)) {
		t.Fatalf("second lock: %v", err)
	}
	// Locks grow to the maximum and stay there.
	for range 10 {
		e.clock.Advance(locked.RetryAfter())
		_ = attempt("wrong", "203.0.113.96")
		err = attempt("wrong", "203.0.113.96")
		if !errors.As(err, &locked) {
			t.Fatalf("not locked: %v", err)
		}
	}
	if locked.RetryAfter() != DefaultUserThrottle.Max {
		t.Fatalf("lock of %s after many failures, want the maximum %s", locked.RetryAfter(), DefaultUserThrottle.Max)
	}
	// Another user is not affected.
	e.clock.Advance(time.Second)
	_, err = e.svc.Login(ctx, LoginRequest{User: "admin", Password: adminPassword, RemoteAddr: "203.0.113.95"})
	must(t, err)
	// After the lock, the right password works and clears the count.
	e.clock.Advance(locked.RetryAfter())
	must(t, attempt("alice's pass phrase", "203.0.113.94"))
	for range DefaultUserThrottle.Free - 1 {
		wantClass(t, "fresh count", attempt("wrong", "203.0.113.93"), ErrUnauthenticated)
	}
	must(t, attempt("alice's pass phrase", "203.0.113.93"))
}

// An address spraying many user names is locked, existing or not, and
// the lock does not depend on whether the names exist.
func TestAddressLockout(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase")
	ctx := context.Background()
	const attacker = "[2001:db8:aa:bb::1]:40000"
	for i := range DefaultAddressThrottle.Free {
		_, err := e.svc.Login(ctx, LoginRequest{User: fmt.Sprintf("user%d", i), Password: "guess", RemoteAddr: attacker})
		wantClass(t, "spray", err, ErrUnauthenticated)
	}
	// Another address of the same /64 is the same attacker.
	_, err := e.svc.Login(ctx, LoginRequest{User: "alice", Password: "alice's pass phrase", RemoteAddr: "[2001:db8:aa:bb::2]:1"})
	var locked *LockedError
	if !errors.As(err, &locked) || !locked.Address || !strings.Contains(err.Error(), "from this address") {
		t.Fatalf("sprayed address: %v", err)
	}
	// Elsewhere alice signs in.
	_, err = e.svc.Login(ctx, LoginRequest{User: "alice", Password: "alice's pass phrase", RemoteAddr: "[2001:db8:aa:cc::1]:1"})
	must(t, err)
}

// A restart does not reset the count: it is in the catalog.
func TestLockoutSurvivesRestart(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase")
	for range DefaultUserThrottle.Free {
		_, err := e.login("alice", "wrong")
		wantClass(t, "wrong password", err, ErrUnauthenticated)
	}
	e.restart()
	_, err := e.login("alice", "alice's pass phrase")
	wantClass(t, "after a restart", err, ErrLocked)
}

// Attempts made at the same time are counted as they start: of many
// parallel guesses only Free are checked at all, the others are refused
// as locked.
func TestParallelGuessesAreCountedUpFront(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase")
	const guesses = 16
	before := passhash.Verifications()
	var wg sync.WaitGroup
	errs := make([]error, guesses)
	for i := range guesses {
		wg.Go(func() {
			_, errs[i] = e.svc.Login(context.Background(), LoginRequest{User: "alice", Password: fmt.Sprintf("guess %d", i),
				RemoteAddr: fmt.Sprintf("192.0.2.%d", i)})
		})
	}
	wg.Wait()
	checked, locked := 0, 0
	for _, err := range errs {
		switch {
		case errors.Is(err, ErrLocked):
			locked++
		case errors.Is(err, ErrUnauthenticated):
			checked++
		default:
			t.Fatalf("guess: %v", err)
		}
	}
	if checked != DefaultUserThrottle.Free || locked != guesses-checked || passhash.Verifications()-before != int64(checked) {
		t.Fatalf("%d guesses checked, %d locked, %d argon2id runs; want %d checked", checked, locked,
			passhash.Verifications()-before, DefaultUserThrottle.Free)
	}
}

// A hash made with weaker costs (by an older coffer) is replaced at the
// next sign-in.
func TestLoginRehashesOldHashes(t *testing.T) {
	e := newEnv(t, Options{Hash: HashParams{MemoryKiB: 24 * 1024, Time: 2, Threads: 1}})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase")
	ctx := context.Background()
	must(t, e.cat.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		u, err := tx.GetUser(ctx, "alice")
		if err != nil {
			return err
		}
		u.PasswordHash = passhash.Hash("alice's pass phrase", DefaultHashParams)
		return tx.UpdateUser(ctx, u)
	}))
	_, err := e.login("alice", "alice's pass phrase")
	must(t, err)
	u, err := e.cat.GetUser(ctx, "alice")
	must(t, err)
	if !strings.HasPrefix(u.PasswordHash, "$argon2id$v=19$m=24576,t=2,p=1$") {
		t.Fatalf("hash after sign-in: %s", u.PasswordHash)
	}
	_, err = e.login("alice", "alice's pass phrase")
	must(t, err)
}

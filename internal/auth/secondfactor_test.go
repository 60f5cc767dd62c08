package auth

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The second factor: TOTP codes are computed here from the seed the
// enrolment shows, at the injected clock's time.

const alicePassword = "alice's pass phrase"

// newFactorEnv is a service with a second-factor key where the
// RepositoryAdmin role must use a second factor, with admin (not
// required) and alice, a RepositoryAdmin on /repositories.
func newFactorEnv(t *testing.T) (*env, *Subject) {
	t.Helper()
	key := bytes.Repeat([]byte{7}, SecondFactorKeyBytes)
	e := newEnv(t, Options{SecondFactorKey: key, RequireSecondFactor: []Role{RoleRepositoryAdmin}})
	admin := e.setUp()
	e.addUser(admin, "alice", alicePassword, Grant{Path: "/repositories", Role: RoleRepositoryAdmin, Propagate: true})
	return e, admin
}

// code is the TOTP code of seed at the clock's time.
func (e *env) code(seed string) string {
	e.t.Helper()
	c, err := totp.GenerateCode(seed, e.clock.Now())
	must(e.t, err)
	return c
}

// enrolAlice signs alice in (sent to enrol), enrols and confirms a TOTP,
// and returns its seed and her recovery codes.
func (e *env) enrolAlice() (string, []string) {
	e.t.Helper()
	ctx := context.Background()
	ns, err := e.login("alice", alicePassword)
	must(e.t, err)
	if ns.Pending != catalog.PendingEnrolment {
		e.t.Fatalf("alice's first sign-in: pending %q, want enrolment", ns.Pending)
	}
	en, err := e.svc.EnrolTOTP(ctx, ns.Subject, "alice", "")
	must(e.t, err)
	codes, err := e.svc.ConfirmTOTP(ctx, ns.Subject, "alice", e.code(en.Secret), "")
	must(e.t, err)
	return en.Secret, codes
}

func TestTOTPEnrolmentAndSecondStep(t *testing.T) {
	e, _ := newFactorEnv(t)
	ctx := context.Background()
	ns, err := e.login("alice", alicePassword)
	must(t, err)
	// Sent to enrol: the session holds no privilege yet.
	if ns.Pending != catalog.PendingEnrolment || ns.Subject.Allowed("/repositories/r", RepoPrune) {
		t.Fatalf("a RepositoryAdmin without a factor: pending %q, allowed %v", ns.Pending, ns.Subject.Allowed("/repositories/r", RepoPrune))
	}
	en, err := e.svc.EnrolTOTP(ctx, ns.Subject, "alice", "192.0.2.9")
	must(t, err)
	if !strings.HasPrefix(en.URI, "otpauth://totp/coffer:alice?") || !strings.Contains(en.URI, "secret="+en.Secret) {
		t.Fatalf("otpauth URI %q", en.URI)
	}
	// Sealed at rest: the catalog holds nothing a code can be computed from.
	row, err := e.cat.GetTOTP(ctx, "alice")
	must(t, err)
	if strings.Contains(row.Sealed, en.Secret) || !strings.HasPrefix(row.Sealed, "v1:") || !row.ConfirmedAt.IsZero() {
		t.Fatalf("stored seed %+v", row)
	}
	_, err = e.svc.ConfirmTOTP(ctx, ns.Subject, "alice", "000000", "192.0.2.9")
	wantClass(t, "a wrong first code", err, ErrUnauthenticated)
	codes, err := e.svc.ConfirmTOTP(ctx, ns.Subject, "alice", e.code(en.Secret), "192.0.2.9")
	must(t, err)
	if len(codes) != RecoveryCodeCount {
		t.Fatalf("%d recovery codes", len(codes))
	}
	// The enrolment made the session a full one.
	sub, err := e.svc.AuthenticateSession(ctx, ns.Cookie)
	must(t, err)
	if sub.Pending != "" || !sub.Allowed("/repositories/r", RepoPrune) {
		t.Fatalf("after enrolment: pending %q", sub.Pending)
	}

	// The next sign-in asks for a code; the one just used is refused
	// (once per step), the next step's is taken.
	ns, err = e.login("alice", alicePassword)
	must(t, err)
	if ns.Pending != catalog.PendingSecondFactor {
		t.Fatalf("second sign-in pending %q", ns.Pending)
	}
	sub, err = e.svc.AuthenticateSession(ctx, ns.Cookie)
	must(t, err)
	if sub.Pending != catalog.PendingSecondFactor || sub.Allowed("/repositories/r", RepoAudit) {
		t.Fatalf("a session waiting for its code: %+v", sub)
	}
	_, err = e.svc.VerifySecondFactor(ctx, sub, e.code(en.Secret), "192.0.2.9")
	wantClass(t, "a code used twice", err, ErrUnauthenticated)
	_, err = e.svc.EnrolTOTP(ctx, sub, "alice", "")
	wantClass(t, "enrolling before the second step", err, ErrDenied)
	e.clock.Advance(30 * time.Second)
	full, err := e.svc.VerifySecondFactor(ctx, sub, e.code(en.Secret), "192.0.2.9")
	must(t, err)
	if !full.Allowed("/repositories/r", RepoPrune) {
		t.Fatal("the full session lacks alice's rights")
	}
	_, err = e.svc.VerifySecondFactor(ctx, full, e.code(en.Secret), "")
	wantClass(t, "a second step of a full session", err, ErrInvalid)

	recs, err := e.cat.ListAudit(ctx, catalog.AuditFilter{User: "alice"})
	must(t, err)
	var ops []string
	for _, r := range recs {
		ops = append(ops, r.Operation+":"+r.Result)
	}
	want := "second-factor:ok enrol-totp:denied second-factor:denied login:ok confirm-totp:ok confirm-totp:denied enrol-totp:ok login:ok"
	if got := strings.Join(ops, " "); got != want {
		t.Fatalf("alice's audit records:\n got %s\nwant %s", got, want)
	}
}

func TestRecoveryCodeIsUsedOnce(t *testing.T) {
	e, _ := newFactorEnv(t)
	ctx := context.Background()
	_, codes := e.enrolAlice()
	ns, err := e.login("alice", alicePassword)
	must(t, err)
	// Typed in capitals, without dashes: the same code.
	typed := strings.ToUpper(strings.ReplaceAll(codes[3], "-", " "))
	if _, err := e.svc.VerifySecondFactor(ctx, ns.Subject, typed, ""); err != nil {
		t.Fatalf("a recovery code: %v", err)
	}
	ns, err = e.login("alice", alicePassword)
	must(t, err)
	_, err = e.svc.VerifySecondFactor(ctx, ns.Subject, codes[3], "")
	wantClass(t, "a recovery code used twice", err, ErrUnauthenticated)
	_, err = e.svc.VerifySecondFactor(ctx, ns.Subject, codes[4], "")
	must(t, err)
	st, err := e.svc.SecondFactors(ctx, ns.Subject, "alice")
	must(t, err)
	if st.RecoveryCodes != RecoveryCodeCount-2 || !st.TOTP || !st.Required {
		t.Fatalf("status %+v", st)
	}
	recs, err := e.cat.ListAudit(ctx, catalog.AuditFilter{User: "alice", Operation: "second-factor", Result: catalog.AuditOK})
	must(t, err)
	if len(recs) != 2 || recs[0].Detail != "recovery code (8 left)" {
		t.Fatalf("audit of recovery codes: %+v", recs)
	}
	// New codes replace the old ones.
	full, err := e.svc.AuthenticateSession(ctx, ns.Cookie)
	must(t, err)
	fresh, err := e.svc.RegenerateRecoveryCodes(ctx, full, "alice", "")
	must(t, err)
	ns, err = e.login("alice", alicePassword)
	must(t, err)
	_, err = e.svc.VerifySecondFactor(ctx, ns.Subject, codes[5], "")
	wantClass(t, "an old code after regeneration", err, ErrUnauthenticated)
	_, err = e.svc.VerifySecondFactor(ctx, ns.Subject, fresh[0], "")
	must(t, err)
}

func TestSecondFactorIsThrottled(t *testing.T) {
	e, _ := newFactorEnv(t)
	ctx := context.Background()
	seed, _ := e.enrolAlice()
	e.clock.Advance(30 * time.Second)
	ns, err := e.login("alice", alicePassword)
	must(t, err)
	for i := 1; i <= DefaultUserThrottle.Free; i++ {
		_, err := e.svc.VerifySecondFactor(ctx, ns.Subject, "123456", "203.0.113.5")
		wantClass(t, "a wrong code", err, ErrUnauthenticated)
	}
	var locked *LockedError
	_, err = e.svc.VerifySecondFactor(ctx, ns.Subject, e.code(seed), "203.0.113.5")
	if !errors.As(err, &locked) {
		t.Fatalf("the right code after %d wrong ones: %v, want locked", DefaultUserThrottle.Free, err)
	}
	// Signing in again with the password does not clear the count.
	ns, err = e.login("alice", alicePassword)
	must(t, err)
	_, err = e.svc.VerifySecondFactor(ctx, ns.Subject, e.code(seed), "203.0.113.5")
	wantClass(t, "a code after signing in again", err, ErrLocked)
	e.clock.Advance(DefaultUserThrottle.Base)
	if _, err := e.svc.VerifySecondFactor(ctx, ns.Subject, e.code(seed), "203.0.113.5"); err != nil {
		t.Fatalf("the right code once the lock lapsed: %v", err)
	}
}

func TestSecondFactorRules(t *testing.T) {
	e, admin := newFactorEnv(t)
	ctx := context.Background()
	e.enrolAlice()
	ns, err := e.login("alice", alicePassword)
	must(t, err)
	// Waiting for its code, a session removes nothing.
	wantClass(t, "removal before the second step", e.svc.RemoveTOTP(ctx, ns.Subject, "alice", ""), ErrDenied)
	_, err = e.svc.RegenerateRecoveryCodes(ctx, ns.Subject, "alice", "")
	wantClass(t, "new codes before the second step", err, ErrDenied)
	// Nobody enrols for another user, not even an administrator.
	_, err = e.svc.EnrolTOTP(ctx, admin, "alice", "")
	wantClass(t, "enrolling for another", err, ErrDenied)
	_, err = e.svc.EnrolTOTP(ctx, Local(), "alice", "")
	wantClass(t, "a second TOTP", err, ErrConflict)
	// An administrator removes a lost factor; the codes go with it, and
	// alice is sent to enrol again.
	must(t, e.svc.RemoveTOTP(ctx, admin, "alice", ""))
	st, err := e.svc.SecondFactors(ctx, admin, "alice")
	must(t, err)
	if st.TOTP || st.TOTPPending || st.RecoveryCodes != 0 {
		t.Fatalf("after removal: %+v", st)
	}
	wantClass(t, "removing it twice", e.svc.RemoveTOTP(ctx, admin, "alice", ""), ErrNotFound)
	ns, err = e.login("alice", alicePassword)
	must(t, err)
	if ns.Pending != catalog.PendingEnrolment {
		t.Fatalf("after removal alice's sign-in is pending %q", ns.Pending)
	}
	// A user whose role need not use one signs in with the password
	// alone.
	e.addUser(admin, "bob", "bob's pass phrase!", Grant{Path: "/policies", Role: RoleBackupOperator, Propagate: true})
	bob, err := e.login("bob", "bob's pass phrase!")
	must(t, err)
	if bob.Pending != "" {
		t.Fatalf("bob's sign-in is pending %q", bob.Pending)
	}
	// A session waiting for its second step ends after PendingLifetime.
	e.clock.Advance(PendingLifetime)
	_, err = e.svc.AuthenticateSession(ctx, ns.Cookie)
	wantClass(t, "a stale half session", err, ErrUnauthenticated)
}

func TestTOTPNeedsTheServersKey(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	_, err := e.svc.EnrolTOTP(context.Background(), admin, "admin", "")
	wantClass(t, "TOTP without a key", err, ErrInvalid)

	// A seed sealed with another key does not open.
	e2, _ := newFactorEnv(t)
	seed, _ := e2.enrolAlice()
	e2.opts.SecondFactorKey = bytes.Repeat([]byte{8}, SecondFactorKeyBytes)
	e2.restart()
	ns, err := e2.login("alice", alicePassword)
	must(t, err)
	e2.clock.Advance(30 * time.Second)
	_, err = e2.svc.VerifySecondFactor(context.Background(), ns.Subject, e2.code(seed), "")
	if err == nil || !strings.Contains(err.Error(), "does not open with this server's second-factor key") {
		t.Fatalf("a seed under another key: %v", err)
	}
}

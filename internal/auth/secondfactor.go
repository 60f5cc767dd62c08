package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// A second factor for local users: a TOTP app (totp.go) or WebAuthn
// security keys and passkeys (webauthn.go), with one-time recovery codes
// (recovery.go). A sign-in with the password alone opens a session that
// still lacks its second step (Subject.Pending): it holds no privilege,
// and the server lets it call only the operations of that step. A user
// with a factor must use it; a user without one whose role is in
// Options.RequireSecondFactor is sent to enrol one first. API tokens are
// exempt: they are scoped and revocable, and scripts have no second hand.

// PendingLifetime bounds a session waiting for its second step: a
// password typed and left there does not stay useful for hours.
const PendingLifetime = 15 * time.Minute

var (
	errBadCode = errorf(ErrUnauthenticated, "wrong code: type the code your authenticator app shows now, or an unused recovery code")
	errNoStep  = errorf(ErrInvalid, "this session has no second step to take: it is signed in already")
)

// factorThrottleKey is the throttle key of second-step attempts for a
// user: not the password's key, which a right password clears, so that
// signing in again with a stolen password does not reset the count of
// guessed codes.
func factorThrottleKey(user string) string {
	return "factor:" + strings.TrimPrefix(userThrottleKey(user), "user:")
}

func (s *Service) factorThrottleKeys(user, remote string) []throttleKey {
	keys := s.throttleKeys(user, remote)
	keys[0].key = factorThrottleKey(user)
	return keys
}

// hasSecondFactor reports a user with a confirmed TOTP or a WebAuthn
// credential.
func hasSecondFactor(ctx context.Context, r catalog.AccessReader, user string) (bool, error) {
	t, err := r.GetTOTP(ctx, user)
	if err == nil && !t.ConfirmedAt.IsZero() {
		return true, nil
	}
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return false, err
	}
	creds, err := r.ListWebAuthnCredentials(ctx, user)
	return len(creds) > 0, err
}

// mustUseSecondFactor reports a user granted a role that must use one, on
// any path.
func (s *Service) mustUseSecondFactor(acl []catalog.ACLEntry, user string) bool {
	for _, e := range acl {
		if e.User == user && e.TokenID == "" && slices.Contains(s.o.RequireSecondFactor, Role(e.Role)) {
			return true
		}
	}
	return false
}

// pendingAfterPassword is what a session opened with the password alone
// still lacks.
func (s *Service) pendingAfterPassword(ctx context.Context, r catalog.AccessReader, user string, acl []catalog.ACLEntry) (string, error) {
	has, err := hasSecondFactor(ctx, r, user)
	switch {
	case err != nil:
		return "", err
	case has:
		return catalog.PendingSecondFactor, nil
	case s.mustUseSecondFactor(acl, user):
		return catalog.PendingEnrolment, nil
	}
	return catalog.PendingNothing, nil
}

// VerifySecondFactor takes the second step of the actor's session with a
// TOTP code or a recovery code.
func (s *Service) VerifySecondFactor(ctx context.Context, actor *Subject, code, remote string) (*Subject, error) {
	if actor == nil {
		return nil, errNoStep
	}
	return s.SecondStep(ctx, actor, remote, s.codeCheck(actor.User, code, s.now()))
}

// FactorCheck checks the proof of a second step in the transaction that
// records its use, given the session taking the step; it says how the
// user got in, for the audit log. A wrong proof is an ErrUnauthenticated
// error.
type FactorCheck func(ctx context.Context, tx catalog.AccessTx, sess catalog.Session) (how string, err error)

// SecondStep takes the second step of the actor's session with check (a
// code, a security key's signature). Wrong proofs are throttled as
// passwords are (per user, apart from the password's count, and per
// address) and audited; the right one makes the session a full one.
func (s *Service) SecondStep(ctx context.Context, actor *Subject, remote string, check FactorCheck) (*Subject, error) {
	if actor == nil || actor.SessionID == "" || actor.Pending != catalog.PendingSecondFactor {
		return nil, errNoStep
	}
	user, now := actor.User, s.now()
	before, after, err := s.countAttemptOn(ctx, "second-factor", user, s.factorThrottleKeys(user, remote), remote, now)
	if err != nil {
		return nil, err
	}
	var subject *Subject
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		sess, err := tx.GetSession(ctx, actor.SessionID)
		if err != nil || sess.Pending != catalog.PendingSecondFactor {
			return errNoStep
		}
		how, err := check(ctx, tx, sess)
		if err != nil {
			return err
		}
		if err := settleAttempt(ctx, tx, before, after); err != nil {
			return err
		}
		if err := tx.SetSessionState(ctx, actor.SessionID, catalog.PendingNothing, ""); err != nil {
			return err
		}
		acl, err := tx.ListACL(ctx, catalog.ACLFilter{User: user})
		if err != nil {
			return err
		}
		subject = NewSubject(user, "", acl)
		subject.SessionID = actor.SessionID
		rec := s.auditRecord(subject, "second-factor", userObject(user), nil)
		rec.RemoteAddr, rec.Detail = remote, how
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err != nil {
		return nil, s.auditFailure(ctx, actor, "second-factor", userObject(user), remote, err)
	}
	return subject, nil
}

// codeCheck is the check of a typed code: a TOTP code (six digits) or a
// recovery code.
func (s *Service) codeCheck(user, typed string, now time.Time) FactorCheck {
	code := normalizeCode(typed)
	if isTOTPCode(code) {
		return func(ctx context.Context, tx catalog.AccessTx, _ catalog.Session) (string, error) {
			return "totp", s.useTOTPCode(ctx, tx, user, code, now)
		}
	}
	return func(ctx context.Context, tx catalog.AccessTx, _ catalog.Session) (string, error) {
		used, err := tx.UseRecoveryCode(ctx, user, recoveryHash(code), now)
		if err != nil {
			return "", err
		}
		if !used {
			return "", errBadCode
		}
		left, err := unusedRecoveryCodes(ctx, tx, user)
		return fmt.Sprintf("recovery code (%d left)", left), err
	}
}

// normalizeCode drops what people type around a code: spaces, dashes,
// capitals.
func normalizeCode(typed string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '\t':
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(typed)))
}

// SecondFactorStatus is what a user has enrolled.
type SecondFactorStatus struct {
	User string
	// TOTP is a confirmed TOTP; TOTPPending one waiting for its first
	// code.
	TOTP, TOTPPending bool
	// RecoveryCodes is how many unused recovery codes are left.
	RecoveryCodes int
	// Keys are the WebAuthn credentials.
	Keys []catalog.WebAuthnCredential
	// Required: the user's roles must use a second factor.
	Required bool
}

// SecondFactors says what user has enrolled: one's own, or anyone's with
// Sys.Audit on /access.
func (s *Service) SecondFactors(ctx context.Context, actor *Subject, user string) (SecondFactorStatus, error) {
	if !s.isSelf(actor, user) && !Allowed(actor, AccessPath, SysAudit) {
		return SecondFactorStatus{}, errorf(ErrDenied, "%s lacks %s on %s to see the second factors of %s", actor, SysAudit, AccessPath, user)
	}
	st := SecondFactorStatus{User: user}
	if _, err := s.store.GetUser(ctx, user); err != nil {
		return st, notFoundUser(err, user)
	}
	t, err := s.store.GetTOTP(ctx, user)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return st, err
	}
	st.TOTP, st.TOTPPending = err == nil && !t.ConfirmedAt.IsZero(), err == nil && t.ConfirmedAt.IsZero()
	if st.RecoveryCodes, err = unusedRecoveryCodes(ctx, s.store, user); err != nil {
		return st, err
	}
	if st.Keys, err = s.store.ListWebAuthnCredentials(ctx, user); err != nil {
		return st, err
	}
	acl, err := s.store.ListACL(ctx, catalog.ACLFilter{User: user})
	st.Required = s.mustUseSecondFactor(acl, user)
	return st, err
}

// isSelf reports the actor acting on its own account (by session or
// token, or the local console).
func (s *Service) isSelf(actor *Subject, user string) bool {
	return actor != nil && (actor.local || actor.User == user)
}

// mayEnrol reports who may add a factor to user's account: the user
// (a full session, a session sent to enrol, or the user's token), or the
// local console. A session waiting for its second step may not: a stolen
// password must not add the thief's factor.
func mayEnrol(actor *Subject, user string) error {
	if actor == nil || (!actor.local && actor.User != user) {
		return errorf(ErrDenied, "%s may not enrol a second factor for %s: each user enrols their own", actor, user)
	}
	if actor.Pending == catalog.PendingSecondFactor {
		return errorf(ErrDenied, "finish signing in with your second factor before you change your factors")
	}
	return nil
}

// mayRemove reports who may remove user's factors or make new recovery
// codes: the user in a full browser session, or whoever holds
// Perm.Modify on /access (an administrator resets a user who lost a
// phone). A token alone does not: it is a script's credential, not the
// person's.
func mayRemove(actor *Subject, user string) error {
	if Allowed(actor, AccessPath, PermModify) {
		return nil
	}
	if actor != nil && actor.User == user && actor.TokenID == "" && actor.Pending == "" && actor.SessionID != "" {
		return nil
	}
	return errorf(ErrDenied, "%s may not change the second factors of %s: the user signed in with them, or %s on %s",
		actor, user, PermModify, AccessPath)
}

// factorsChanged ends the enrolment a session was sent to, once the user
// has a factor.
func factorsChanged(ctx context.Context, tx catalog.AccessTx, actor *Subject) error {
	if actor == nil || actor.SessionID == "" || actor.Pending != catalog.PendingEnrolment {
		return nil
	}
	return tx.SetSessionState(ctx, actor.SessionID, catalog.PendingNothing, "")
}

// notFoundUser names a missing user in this package's class.
func notFoundUser(err error, user string) error {
	if errors.Is(err, catalog.ErrNotFound) {
		return errorf(ErrNotFound, "user %s does not exist", user)
	}
	return err
}

// PendingError is the refusal of what a session waiting for its second
// step (or its enrolment) may not do yet.
func (s *Subject) PendingError() error {
	if s.Pending == catalog.PendingEnrolment {
		return errorf(ErrUnauthenticated, "%s must enrol a second factor before anything else: the console's Account page, "+
			"or POST /access/users/%s/totp", s.User, s.User)
	}
	return errorf(ErrUnauthenticated, "finish signing in: send the code of your second factor (POST /access/second-factor)")
}

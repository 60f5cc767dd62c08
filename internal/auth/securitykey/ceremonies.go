package securitykey

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/auth/autherr"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// The two ceremonies: a registration (Account page) and a sign-in's
// second step. Each begins with options for the browser's
// navigator.credentials call and ends with the key's answer to them.

// BeginRegistration starts the registration of a new key of name (the
// actor's own, in its browser session): the options of
// navigator.credentials.create. The user's keys are excluded: a key is
// registered once.
func (k *Keys) BeginRegistration(ctx context.Context, actor *auth.Subject, name string) (*protocol.CredentialCreation, error) {
	if k.wa == nil {
		return nil, k.err
	}
	u, err := k.keysOf(ctx, actor, name)
	if err != nil {
		return nil, err
	}
	creation, s, err := k.wa.BeginRegistration(u,
		webauthn.WithExclusions(webauthn.Credentials(u.creds).CredentialDescriptors()),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
			ResidentKey: protocol.ResidentKeyRequirementDiscouraged, UserVerification: protocol.VerificationPreferred}))
	if err != nil {
		return nil, err
	}
	return creation, k.keep(ctx, actor, name, ceremonyRegistration, s)
}

// FinishRegistration checks the key's answer (the JSON of the browser's
// PublicKeyCredential) to the registration under way in the actor's
// session and keeps the key as keyName. A user who had no second factor
// gets recovery codes, returned (shown this once).
func (k *Keys) FinishRegistration(ctx context.Context, actor *auth.Subject, name, keyName, remote string, answer []byte) ([]string, error) {
	if k.wa == nil {
		return nil, k.err
	}
	return k.access.EnrolFactor(ctx, actor, name, remote, OpRegister, func(ctx context.Context, tx catalog.AccessTx) (string, error) {
		if err := checkName(keyName); err != nil {
			return "", err
		}
		sess, err := tx.GetSession(ctx, actor.SessionID)
		if err != nil {
			return "", autherr.Errorf(autherr.ErrInvalid, "a security key is registered in a browser's session")
		}
		s, err := ceremonyOf(sess, ceremonyRegistration)
		if err != nil {
			return "", err
		}
		parsed, err := protocol.ParseCredentialCreationResponseBytes(answer)
		if err != nil {
			return "", autherr.Errorf(autherr.ErrInvalid, "the security key's answer does not read: %s", detail(err))
		}
		rows, err := tx.ListWebAuthnCredentials(ctx, name)
		if err != nil {
			return "", err
		}
		u, err := load(name, rows)
		if err != nil {
			return "", err
		}
		cred, err := k.wa.CreateCredential(u, s, parsed)
		if err != nil {
			return "", autherr.Errorf(autherr.ErrInvalid, "the security key's registration is refused: %s", detail(err))
		}
		js, err := json.Marshal(cred)
		if err != nil {
			return "", err
		}
		if err := tx.SetSessionState(ctx, sess.IDSHA256, sess.Pending, ""); err != nil {
			return "", err
		}
		id := keyID(cred.ID)
		row := catalog.WebAuthnCredential{ID: id, User: name, Name: keyName, Credential: js, CreatedAt: now()}
		if err := tx.InsertWebAuthnCredential(ctx, row); err != nil {
			return "", err
		}
		return fmt.Sprintf("security key %q (%s) added", keyName, id), nil
	})
}

// BeginSignIn starts the second step of the actor's sign-in with a key:
// the options of navigator.credentials.get, allowing the user's keys.
func (k *Keys) BeginSignIn(ctx context.Context, actor *auth.Subject) (*protocol.CredentialAssertion, error) {
	if k.wa == nil {
		return nil, k.err
	}
	if actor == nil || actor.Pending != catalog.PendingSecondFactor {
		return nil, autherr.Errorf(autherr.ErrInvalid, "this session has no second step to take: it is signed in already")
	}
	u, err := k.keysOf(ctx, actor, actor.User)
	if err != nil {
		return nil, err
	}
	if len(u.creds) == 0 {
		return nil, autherr.Errorf(autherr.ErrNotFound, "%s has no security key: type a code instead", actor.User)
	}
	assertion, s, err := k.wa.BeginLogin(u, webauthn.WithUserVerification(protocol.VerificationPreferred))
	if err != nil {
		return nil, err
	}
	return assertion, k.keep(ctx, actor, actor.User, ceremonySignIn, s)
}

// FinishSignIn takes the second step with the key's answer to the
// challenge of BeginSignIn: throttled and audited as codes are (a wrong
// key, a removed one, a replayed answer count as wrong codes).
func (k *Keys) FinishSignIn(ctx context.Context, actor *auth.Subject, remote string, answer []byte) (*auth.Subject, error) {
	if k.wa == nil {
		return nil, k.err
	}
	return k.access.SecondStep(ctx, actor, remote, func(ctx context.Context, tx catalog.AccessTx, sess catalog.Session) (string, error) {
		s, err := ceremonyOf(sess, ceremonySignIn)
		if err != nil {
			return "", err
		}
		parsed, err := protocol.ParseCredentialRequestResponseBytes(answer)
		if err != nil {
			return "", autherr.Errorf(autherr.ErrUnauthenticated, "the security key's answer does not read: %s", detail(err))
		}
		rows, err := tx.ListWebAuthnCredentials(ctx, sess.User)
		if err != nil {
			return "", err
		}
		u, err := load(sess.User, rows)
		if err != nil {
			return "", err
		}
		cred, err := k.wa.ValidateLogin(u, s, parsed)
		if err != nil {
			return "", autherr.Errorf(autherr.ErrUnauthenticated, "the security key is refused: %s", detail(err))
		}
		if cred.Authenticator.CloneWarning {
			return "", autherr.Errorf(autherr.ErrUnauthenticated, "the security key's signature counter went back: "+
				"a copy of the key may be in use; remove it and register the key again")
		}
		return used(ctx, tx, rows, cred)
	})
}

// used records a key's new signature count and the time it was used.
func used(ctx context.Context, tx catalog.AccessTx, rows []catalog.WebAuthnCredential, cred *webauthn.Credential) (string, error) {
	id := keyID(cred.ID)
	for _, r := range rows {
		if r.ID != id {
			continue
		}
		js, err := json.Marshal(cred)
		if err != nil {
			return "", err
		}
		r.Credential, r.LastUsedAt = js, now()
		return fmt.Sprintf("security key %q (%s)", r.Name, id), tx.UpdateWebAuthnCredential(ctx, r)
	}
	return "", autherr.Errorf(autherr.ErrUnauthenticated, "the security key is not one of yours")
}

// Remove removes a user's key: one's own in a full session, or anyone's
// with Perm.Modify on /access. The recovery codes go with the last
// factor. No relying party is needed.
func Remove(ctx context.Context, access *auth.Service, actor *auth.Subject, name, id, remote string) error {
	return access.RemoveFactor(ctx, actor, name, remote, OpRemove, func(ctx context.Context, tx catalog.AccessTx) (string, error) {
		deleted, err := tx.DeleteWebAuthnCredential(ctx, name, id)
		if err != nil {
			return "", err
		}
		if !deleted {
			return "", autherr.Errorf(autherr.ErrNotFound, "%s has no security key %s", name, id)
		}
		return "security key " + id + " removed", nil
	})
}

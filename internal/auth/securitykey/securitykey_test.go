package securitykey

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/coffer-backup/coffer/internal/auth/autherr"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// Without the server's address there is no relying party: every
// ceremony is refused with the reason, before anything is read.
func TestNoRelyingPartyWithoutTheServersAddress(t *testing.T) {
	k := New(nil, "")
	if _, err := k.BeginRegistration(context.Background(), nil, "alice"); err == nil || !errors.Is(err, autherr.ErrInvalid) ||
		!strings.Contains(err.Error(), "in a browser") {
		t.Fatalf("a registration without the server's address: %v", err)
	}
	if _, err := k.FinishSignIn(context.Background(), nil, "", nil); err == nil || !errors.Is(err, autherr.ErrInvalid) {
		t.Fatalf("a sign-in without the server's address: %v", err)
	}
	if k := New(nil, "https://backup.example.com:8443"); k.wa == nil || k.wa.Config.RPID != "backup.example.com" ||
		k.wa.Config.RPOrigins[0] != "https://backup.example.com:8443" {
		t.Fatalf("the relying party of https://backup.example.com:8443: %+v", k.wa)
	}
}

// A session's ceremony finishes only its own kind: a registration's
// challenge does not sign anyone in, and a session without one is
// refused as unauthenticated (a wrong proof, counted).
func TestCeremonyOfItsKindOnly(t *testing.T) {
	data, err := json.Marshal(ceremony{Kind: ceremonyRegistration, Session: webauthn.SessionData{Challenge: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	sess := catalog.Session{Challenge: string(data)}
	if s, err := ceremonyOf(sess, ceremonyRegistration); err != nil || s.Challenge != "abc" {
		t.Fatalf("the registration's own ceremony: %+v %v", s, err)
	}
	for _, sess := range []catalog.Session{sess, {}, {Challenge: "{not json"}} {
		if _, err := ceremonyOf(sess, ceremonySignIn); !errors.Is(err, autherr.ErrUnauthenticated) {
			t.Errorf("a sign-in with the session's challenge %q: %v", sess.Challenge, err)
		}
	}
}

func TestKeyNames(t *testing.T) {
	for name, ok := range map[string]bool{"": true, "the blue key": true, "clé bleue": true,
		strings.Repeat("k", MaxNameLen): true, strings.Repeat("k", MaxNameLen+1): false, "a\nb": false, "\xff": false} {
		if err := checkName(name); (err == nil) != ok {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

package repo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/crypto"
)

// TestKeyInUseIsNotRemoved: the key whose password opened a session cannot
// be removed through it (its holder would be locked out at the next open),
// while a session opened with another key removes it.
func TestKeyInUseIsNotRemoved(t *testing.T) {
	r, st := newTestRepo(t, Options{})
	ctx := context.Background()
	first := r.CurrentKeyID()
	second, err := r.AddKey(ctx, []byte("pw2"), "second")
	if err != nil {
		t.Fatal(err)
	}
	if first == "" || first == second.ID || r.CurrentKeyID() != first {
		t.Fatalf("the session's key is %q (the first key), the added one %q", r.CurrentKeyID(), second.ID)
	}
	_, err = r.RemoveKey(ctx, first[:8])
	if !errors.Is(err, ErrKeyInUse) || !strings.Contains(err.Error(), first[:8]) || !strings.Contains(err.Error(), "coffer key add") {
		t.Fatalf("removing the key in use: %v", err)
	}
	if _, err := Open(ctx, st, []byte("pw"), Options{}); err != nil {
		t.Fatalf("the refused key no longer opens: %v", err)
	}

	other, err := Open(ctx, st, []byte("pw2"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if other.CurrentKeyID() != second.ID {
		t.Fatalf("opened with the second password, the session's key is %q, want %q", other.CurrentKeyID(), second.ID)
	}
	if removed, err := other.RemoveKey(ctx, first[:8]); err != nil || removed != first {
		t.Fatalf("removing the first key with the second: %q, %v", removed, err)
	}
	if _, err := Open(ctx, st, []byte("pw"), Options{}); !errors.Is(err, crypto.ErrWrongPassword) {
		t.Fatalf("the removed key still opens: %v", err)
	}
}

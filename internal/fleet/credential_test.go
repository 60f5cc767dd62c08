package fleet_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// The catalog grants the workers' role the queue's schema by name.
func TestWorkerQueueSchemaIsTheQueues(t *testing.T) {
	if catalog.WorkerQueueSchema != queue.Schema {
		t.Fatalf("catalog.WorkerQueueSchema %q, queue.Schema %q", catalog.WorkerQueueSchema, queue.Schema)
	}
}

// A token made for a worker reads back as its name and secret, and the
// worker's DSN logs in as its role with the secret.
func TestTokenRoundTrip(t *testing.T) {
	token, secret, err := fleet.NewToken("kvm-7")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := fleet.NewToken("kvm-7")
	if token == other || !strings.HasPrefix(token, "cwt1.kvm-7.") || len(secret) != 43 {
		t.Fatalf("tokens %q, %q", token, other)
	}
	name, got, err := fleet.ParseToken(" " + token + "\n")
	if err != nil || name != "kvm-7" || got != secret {
		t.Fatalf("parse: %q %q %v", name, got, err)
	}
	dsn, name, err := fleet.WorkerDSN("postgres://db.example:5433/coffer?sslmode=verify-full", token)
	if err != nil || name != "kvm-7" {
		t.Fatal(dsn, err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.User.Password(); u.User.Username() != "coffer_worker_kvm-7" || pw != secret || u.Query().Get("sslmode") != "verify-full" {
		t.Fatalf("dsn %s", dsn)
	}
	if _, _, err := fleet.NewToken(strings.Repeat("a", catalog.MaxWorkerRoleName+1)); err == nil {
		t.Fatal("a name whose role is longer than 63 bytes got a token")
	}
}

// Malformed tokens and addresses are refused without repeating the token.
func TestBadTokens(t *testing.T) {
	for _, tok := range []string{"", "cwt2.kvm1.x", "cwt1.kvm1", "cwt1.KVM1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "cwt1.kvm1.short", "cwt1.kvm1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA$$"} {
		if _, _, err := fleet.ParseToken(tok); !errors.Is(err, fleet.ErrBadToken) || (tok != "" && strings.Contains(err.Error(), tok)) {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	good, _, _ := fleet.NewToken("kvm1")
	for addr, want := range map[string]string{
		"/var/lib/coffer/catalog.db":           "PostgreSQL",
		"postgres://coffer:pw@db/coffer":       "without a user or password",
		"postgres://db/coffer?user=coffer":     "may not set user",
		"postgres://db/coffer?password=secret": "may not set password",
	} {
		if _, _, err := fleet.WorkerDSN(addr, good); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("address %s: %v, want %q", addr, err, want)
		}
	}
}

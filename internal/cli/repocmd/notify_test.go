package repocmd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// hookReceiver records the bodies a webhook target posts.
type hookReceiver struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err == nil {
		h.mu.Lock()
		h.bodies = append(h.bodies, v)
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) received() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.bodies...)
}

// TestFailedRunNotifies: a policy run over the simulated fleet in which a
// VM fails mails the on-call list through a real SMTP server and posts to
// a webhook, naming the policy and the failed VM; a clean run of another
// policy sends nothing (successes are not routed by default).
func TestFailedRunNotifies(t *testing.T) {
	smtp := testutil.StartSMTP(t, testutil.SMTPOptions{TLS: "none"})
	hooks := &hookReceiver{}
	hook := httptest.NewServer(hooks)
	defer hook.Close()
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(fmt.Sprintf(`
connections:
  - name: lab
    kind: fake
    options: {seed: 5, vms: 3, hosts: 1, datastores: 1, disk-size: 128KiB, fail: [db-0001]}
policies:
  - {name: broken, connection: lab, select: {names: [web-0000, db-0001]}}
  - {name: clean, connection: lab, select: {names: [app-0002]}}
notifications:
  targets:
    - name: ops-mail
      smtp: {host: %s, port: %d, tls: none, from: "coffer <coffer@example.com>", to: [ops@example.com]}
    - name: chat
      webhook: {url: %q}
`, smtp.Host, smtp.Port, hook.URL))
	e.Expect(command.ExitOK, "run", "clean")
	if n := len(smtp.Mails(t)) + len(hooks.received()); n != 0 {
		t.Fatalf("a clean run sent %d notifications", n)
	}
	e.Expect(command.ExitPartial, "run", "broken")
	// coffer run gives its notifications a moment to go out before it
	// exits: they are there when it has returned.
	mails := smtp.Mails(t)
	if len(mails) != 1 {
		t.Fatalf("%d mails after a failed run, want 1", len(mails))
	}
	for _, want := range []string{"Subject: [coffer] warning: Backup job of policy broken partly failed", "Failed VMs: db-0001",
		"X-Coffer-Event: task-failed"} {
		if !strings.Contains(mails[0].Data, want) {
			t.Errorf("the mail lacks %q:\n%s", want, mails[0].Data)
		}
	}
	got := hooks.received()
	if len(got) != 1 || got[0]["type"] != "task-failed" || got[0]["labels"].(map[string]any)["policy"] != "broken" {
		t.Fatalf("webhook bodies: %+v", got)
	}
}

// TestVerifyDamageNotifies: a verify that finds a pack of b1 damaged
// posts verify-damage, with data lost and b1 as the affected point.
func TestVerifyDamageNotifies(t *testing.T) {
	f := newDamageFixture(t)
	e := f.e
	hooks := &hookReceiver{}
	hook := httptest.NewServer(hooks)
	defer hook.Close()
	e.Config(fmt.Sprintf("notifications:\n  targets:\n    - name: chat\n      webhook: {url: %q}\n", hook.URL))
	flip(afterHead)(t, f.bPacks[1])
	e.Expect(command.ExitIntegrity, "verify", "--read-data")
	var damage map[string]any
	for _, b := range hooks.received() {
		if b["type"] == "verify-damage" {
			damage = b
		}
	}
	if damage == nil {
		t.Fatalf("no verify-damage posted: %+v", hooks.received())
	}
	d := damage["damage"].(map[string]any)
	points, _ := d["points"].([]any)
	if d["data_lost"] != true || len(points) != 1 || !strings.HasPrefix(f.ids["b1"], fmt.Sprint(points[0])) || damage["severity"] != "error" {
		t.Fatalf("damage details %+v, want data lost in %s", d, f.ids["b1"])
	}
	// The failed verify is a task-failed too.
	types := map[any]int{}
	for _, b := range hooks.received() {
		types[b["type"]]++
	}
	if types["task-failed"] != 1 || types["verify-damage"] != 1 {
		t.Fatalf("events posted: %v", types)
	}
}

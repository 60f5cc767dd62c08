package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestSendTest: the test function reaches a configured target (enabled or
// not) and an unsaved one at once, returns why one cannot be reached, and
// records nothing.
func TestSendTest(t *testing.T) {
	e := newEnv(t)
	mailSrv, mailTarget := e.smtp("mail")
	hook, hookTarget := e.newReceiver("hook")
	hookTarget.Disable = true
	broken, brokenTarget := e.newReceiver("broken", http.StatusNotFound)
	down := Target{Name: "down", SMTP: &SMTPTarget{Host: "127.0.0.1", Port: testutil.FreePort(t), TLS: NoTLS,
		From: "c@example.com", To: []string{"ops@example.com"}}}
	n := e.start(&Config{Targets: []Target{mailTarget, hookTarget, brokenTarget, down}})
	ctx := context.Background()

	if err := n.SendTest(ctx, "mail"); err != nil {
		t.Fatalf("test of mail: %v", err)
	}
	mails := mailSrv.Mails(t)
	if len(mails) != 1 {
		t.Fatalf("%d mails", len(mails))
	}
	header, text := readMail(t, mails[0].Data)
	if header.Get("Subject") != "[coffer] info: Test notification from coffer" || header.Get("X-Coffer-Event") != "test" ||
		!strings.Contains(text, "This is a test of notification target mail.") {
		t.Errorf("test mail %v\n%s", header, text)
	}

	if err := n.SendTest(ctx, "hook"); err != nil {
		t.Fatalf("test of a disabled hook: %v", err)
	}
	var body WebhookBody
	if err := json.Unmarshal(hook.requests()[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != TypeTest || body.Delivery != 0 || body.Target != "hook" || body.Object != "/notifications/targets/hook" {
		t.Errorf("test body %+v", body)
	}

	for name, want := range map[string]string{"broken": "refused with HTTP 404", "down": "connection refused",
		"nope": `no notification target is named "nope"`} {
		if err := n.SendTest(ctx, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("test of %s: %v, want an error containing %q", name, err, want)
		}
	}
	if len(broken.requests()) != 1 {
		t.Errorf("broken got %d requests", len(broken.requests()))
	}

	// A target that is not saved yet (the console's "test" before "save").
	_, unsaved := e.newReceiver("unsaved")
	if err := SendTest(ctx, unsaved, time.Minute); err != nil {
		t.Fatalf("test of an unsaved target: %v", err)
	}
	if err := SendTest(ctx, Target{Name: "x", Webhook: &WebhookTarget{URL: "ftp://x"}}, 0); err == nil {
		t.Fatal("an invalid target was tested")
	}
	if ds := e.deliveries(catalog.DeliveryFilter{}); len(ds) != 0 {
		t.Fatalf("tests were recorded: %+v", ds)
	}
}

// TestTargetFilesChecked: New and Reload read every enabled target's
// secret and CA files and name the target and file that fail; a refused
// Reload keeps the configuration in use.
func TestTargetFilesChecked(t *testing.T) {
	e := newEnv(t)
	_, good := e.newReceiver("good")
	missing := Target{Name: "missing", Webhook: &WebhookTarget{URL: "https://x", SecretFile: e.dir + "/no-such-secret"}}
	empty := Target{Name: "empty", SMTP: &SMTPTarget{Host: "h", Username: "u", PasswordFile: e.file("empty.pw", "\n"),
		From: "a@b.c", To: []string{"d@e.f"}}}
	notPEM := Target{Name: "not-pem", Webhook: &WebhookTarget{URL: "https://x", CAFile: e.file("ca.txt", "hello")}}
	off := missing
	off.Name, off.Disable = "off", true // disabled targets are not checked
	_, err := New(&Config{Targets: []Target{good, missing, empty, notPEM, off}}, e.cat, Options{})
	for _, want := range []string{"target missing: secret-file: open " + e.dir + "/no-such-secret: no such file",
		"target empty: password-file: " + e.dir + "/empty.pw is empty", "target not-pem: ca-file " + e.dir + "/ca.txt holds no PEM"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "target off") {
		t.Errorf("a disabled target was checked: %v", err)
	}

	n := e.start(&Config{Targets: []Target{good}})
	if err := n.Reload(&Config{Targets: []Target{good, missing}}); err == nil {
		t.Fatal("Reload accepted a missing secret file")
	}
	if err := n.Reload(&Config{Matchers: []Matcher{{Name: "m", Targets: []string{"x"}}}}); err == nil {
		t.Fatal("Reload accepted an invalid configuration")
	}
	if _, ok := n.Config().Target("good"); !ok || len(n.Config().Targets) != 1 {
		t.Fatalf("a refused Reload changed the configuration: %+v", n.Config())
	}
	if err := n.Emit(context.Background(), Event{Type: TypeTaskFailed}); err == nil {
		t.Fatal("an event without a title was accepted")
	}
}

// TestDeliveryToRemovedTarget: a pending delivery whose target was removed
// or disabled meanwhile fails with that reason instead of staying pending.
func TestDeliveryToRemovedTarget(t *testing.T) {
	e := newEnv(t)
	_, a := e.newReceiver("a")
	_, b := e.newReceiver("b")
	first, err := New(&Config{Targets: []Target{a, b}}, e.cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.emit(first, sampleEvents()[TypeTaskFailed])
	b.Disable = true
	e.start(&Config{Targets: []Target{b}})
	want := map[string]string{"a": "target a is no longer configured", "b": "target b is disabled"}
	for range 2 {
		at := e.waitAttempt("a failed delivery", func(Attempt) bool { return true })
		d := e.delivery(at.Delivery)
		if d.Status != catalog.DeliveryFailed || d.LastError != want[d.Target] {
			t.Errorf("%+v, want failed with %q", d, want[d.Target])
		}
	}
}

package notify

import (
	"crypto/hmac"
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net/http"
	"net/mail"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestFailureReachesBothTargets: a failure goes to a mail server (STARTTLS,
// AUTH) and a signed HTTPS webhook with its details; a success emitted
// before it goes nowhere and leaves no record.
func TestFailureReachesBothTargets(t *testing.T) {
	e := newEnv(t)
	mailSrv, mailTarget := e.smtp("ops-mail")
	hook, hookTarget := e.newReceiver("chat")
	hookTarget.Webhook.SecretFile = e.file("hook.secret", "hook-key\n")
	n := e.start(&Config{Targets: []Target{mailTarget, hookTarget}, Delivery: fast})

	evs := sampleEvents()
	e.emit(n, evs[TypeTaskSucceeded])
	if ds := e.deliveries(catalog.DeliveryFilter{}); len(ds) != 0 {
		t.Fatalf("a success was recorded for delivery: %+v", ds)
	}
	failure := evs[TypeTaskFailed]
	e.emit(n, failure)
	got := e.waitDelivered(2)
	all := e.deliveries(catalog.DeliveryFilter{})
	if len(all) != 2 {
		t.Fatalf("%d deliveries recorded, want 2 (the failure to each target)", len(all))
	}
	for _, d := range got {
		if d.Status != catalog.DeliveryDelivered || d.Attempts != 1 || d.DeliveredAt.IsZero() || d.LastError != "" ||
			d.Event.Type != string(TypeTaskFailed) || d.Event.Title != failure.Title {
			t.Errorf("delivery record %+v", d)
		}
	}

	mails := mailSrv.Mails(t)
	if len(mails) != 1 {
		t.Fatalf("%d mails, want the failure only", len(mails))
	}
	m := mails[0]
	if !m.Encrypted || m.AuthUser != "coffer" || m.MailFrom != "coffer@example.com" ||
		!reflect.DeepEqual(m.RcptTos, []string{"ops@example.com"}) {
		t.Errorf("mail envelope %+v", m)
	}
	header, text := readMail(t, m.Data)
	if s := header.Get("Subject"); s != "[coffer] error: Backup of web-01 failed" {
		t.Errorf("subject %q", s)
	}
	if header.Get("X-Coffer-Event") != "task-failed" || header.Get("To") != "<ops@example.com>" {
		t.Errorf("headers %v", header)
	}
	mailDelivery := deliveryTo(t, got, "ops-mail")
	if want := Text(withID(failure, mailDelivery.EventID), "ops-mail", mailDelivery.ID); text != want {
		t.Errorf("mail text:\n%s\nwant:\n%s", text, want)
	}
	for _, want := range []string{"Error: snapshot: timed out", "Object: /connections/lab/vm/web-01",
		"Labels: connection=lab policy=prod-nightly repository=main task=vm vm=web-01"} {
		if !strings.Contains(text, want) {
			t.Errorf("mail lacks %q:\n%s", want, text)
		}
	}

	reqs := hook.requests()
	if len(reqs) != 1 {
		t.Fatalf("webhook got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	var body WebhookBody
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("webhook body %s: %v", r.body, err)
	}
	hookDelivery := deliveryTo(t, got, "chat")
	if body.Version != WebhookVersion || body.Delivery != hookDelivery.ID || body.Target != "chat" ||
		body.ID != hookDelivery.EventID || body.Type != TypeTaskFailed || body.Severity != Error ||
		body.Task == nil || body.Task.Error != "snapshot: timed out" || body.Labels["policy"] != "prod-nightly" {
		t.Errorf("webhook body %+v", body)
	}
	if r.header.Get(HeaderDelivery) != strconv.FormatInt(hookDelivery.ID, 10) || r.header.Get(HeaderEvent) != "task-failed" ||
		r.header.Get("Content-Type") != "application/json" {
		t.Errorf("webhook headers %v", r.header)
	}
	// The signature verifies with the secret, and not over another body.
	sig := r.header.Get(HeaderSignature)
	if !hmac.Equal([]byte(sig), []byte(Sign(r.body, "hook-key"))) {
		t.Errorf("signature %q does not verify", sig)
	}
	tampered := append([]byte(nil), r.body...)
	tampered[len(tampered)-2] ^= 1
	if hmac.Equal([]byte(sig), []byte(Sign(tampered, "hook-key"))) || hmac.Equal([]byte(sig), []byte(Sign(r.body, "other"))) {
		t.Error("the signature verifies a changed body or another secret")
	}
}

// readMail parses a received message and decodes its text.
func readMail(t *testing.T, data string) (mail.Header, string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	var body io.Reader = msg.Body
	if msg.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return msg.Header, strings.ReplaceAll(string(b), "\r\n", "\n")
}

func withID(ev Event, id int64) Event {
	ev.ID = id
	return ev
}

func deliveryTo(t *testing.T, ds []catalog.Delivery, target string) catalog.Delivery {
	t.Helper()
	for _, d := range ds {
		if d.Target == target {
			return d
		}
	}
	t.Fatalf("no delivery to %s in %+v", target, ds)
	return catalog.Delivery{}
}

// TestMatcherRoutesByLabel: a matcher sends the prod policy's events (its
// successes too) to one webhook; the other target keeps the default, and
// no signature header is sent without a secret.
func TestMatcherRoutesByLabel(t *testing.T) {
	e := newEnv(t)
	prod, prodTarget := e.newReceiver("prod")
	rest, restTarget := e.newReceiver("rest")
	n := e.start(&Config{Targets: []Target{prodTarget, restTarget},
		Matchers: []Matcher{{Name: "prod-only", Targets: []string{"prod"}, Labels: map[string]string{"policy": "prod-*"}}},
		Delivery: fast})
	evs := sampleEvents()
	dev := TaskFinished(Subject{Policy: "dev", Connection: "lab", VM: "dev-01"}, TaskDetails{Kind: KindVM, Status: "failed"})
	for _, ev := range []Event{evs[TypeTaskSucceeded], dev, evs[TypeTaskFailed]} {
		e.emit(n, ev)
	}
	// prod: the prod success and failure; rest: both failures.
	e.waitDelivered(4)
	titles := func(r *receiver) []string {
		var out []string
		for _, req := range r.requests() {
			var b WebhookBody
			if err := json.Unmarshal(req.body, &b); err != nil {
				t.Fatal(err)
			}
			if req.header.Get(HeaderSignature) != "" {
				t.Errorf("a signature without a secret: %v", req.header)
			}
			out = append(out, b.Title)
		}
		return sortedCopy(out)
	}
	if got, want := titles(prod), sortedCopy([]string{evs[TypeTaskSucceeded].Title, evs[TypeTaskFailed].Title}); !reflect.DeepEqual(got, want) {
		t.Errorf("prod got %q, want %q", got, want)
	}
	if got, want := titles(rest), sortedCopy([]string{dev.Title, evs[TypeTaskFailed].Title}); !reflect.DeepEqual(got, want) {
		t.Errorf("rest got %q, want %q", got, want)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestRetryUntilSMTPServerStarts: the mail server is down when the failure
// is emitted; the attempts fail and are recorded, and once the server
// starts on the configured port the next retry delivers.
func TestRetryUntilSMTPServerStarts(t *testing.T) {
	e := newEnv(t)
	tlsFiles := testutil.NewTLSFiles(t, e.dir)
	port := testutil.FreePort(t)
	target := Target{Name: "mail", SMTP: &SMTPTarget{Host: "127.0.0.1", Port: port, TLS: ImplicitTLS, CAFile: tlsFiles.CA,
		From: "coffer@example.com", To: []string{"ops@example.com"}}}
	n := e.start(&Config{Targets: []Target{target}, Delivery: fast})
	e.emit(n, sampleEvents()[TypeRPOMissed])

	a := e.waitAttempt("a failed attempt", func(a Attempt) bool { return a.Status == catalog.DeliveryPending })
	d := e.delivery(a.Delivery)
	if d.Status != catalog.DeliveryPending || d.Attempts < 1 || !strings.Contains(d.LastError, "connection refused") ||
		!d.NextAttemptAt.After(d.LastAttemptAt) {
		t.Fatalf("record after a refused connection: %+v", d)
	}
	srv := testutil.StartSMTP(t, testutil.SMTPOptions{Port: port, TLS: "implicit", Cert: tlsFiles.Cert, Key: tlsFiles.Key})
	done := e.waitAttempt("delivery", func(a Attempt) bool { return a.Status == catalog.DeliveryDelivered })
	d = e.delivery(done.Delivery)
	if d.ID != a.Delivery || d.Status != catalog.DeliveryDelivered || d.Attempts < 2 || d.Attempts != done.Attempts {
		t.Fatalf("record after the server started: %+v", d)
	}
	mails := srv.Mails(t)
	if len(mails) != 1 || !mails[0].Encrypted {
		t.Fatalf("mails %+v", mails)
	}
	if _, text := readMail(t, mails[0].Data); !strings.Contains(text, "web-01 has no backup within its RPO of 24h0m0s\n") {
		t.Fatalf("mail text:\n%s", text)
	}
}

// TestRefusalsFailAtOnce: a receiver's 4xx, a mail server's 550 and a
// certificate that does not verify are not retried; the delivery is
// failed with the reason, and Retry sends it again once fixed.
func TestRefusalsFailAtOnce(t *testing.T) {
	e := newEnv(t)
	hook, hookTarget := e.newReceiver("hook", http.StatusBadRequest)
	_, untrusted := e.newReceiver("untrusted")
	untrusted.Webhook.CAFile = ""
	tlsFiles := testutil.NewTLSFiles(t, e.dir)
	srv := testutil.StartSMTP(t, testutil.SMTPOptions{TLS: "starttls", Cert: tlsFiles.Cert, Key: tlsFiles.Key,
		RejectRcpt: "gone@example.com"})
	mailTarget := Target{Name: "mail", SMTP: &SMTPTarget{Host: srv.Host, Port: srv.Port, CAFile: tlsFiles.CA,
		From: "coffer@example.com", To: []string{"gone@example.com"}}}
	n := e.start(&Config{Targets: []Target{hookTarget, untrusted, mailTarget}, Delivery: fast})
	e.emit(n, sampleEvents()[TypeLockLapsing])
	want := map[string]string{"hook": "refused with HTTP 400: status 400", "untrusted": "certificate",
		"mail": `550 "5.1.1 mailbox unavailable"`}
	ids := map[string]int64{}
	for range want {
		a := e.waitAttempt("a failed delivery", func(a Attempt) bool { return a.Status == catalog.DeliveryFailed })
		d := e.delivery(a.Delivery)
		if d.Attempts != 1 || !strings.Contains(d.LastError, want[d.Target]) {
			t.Errorf("%s: %+v, want one attempt failing with %q", d.Target, d, want[d.Target])
		}
		ids[d.Target] = d.ID
	}
	if len(hook.requests()) != 1 || len(srv.Mails(t)) != 0 {
		t.Fatalf("hook got %d requests, the mail server %d mails", len(hook.requests()), len(srv.Mails(t)))
	}
	// The receiver is fixed: a retry delivers.
	hook.setStatuses(http.StatusNoContent)
	if err := n.Retry(t.Context(), ids["hook"]); err != nil {
		t.Fatal(err)
	}
	a := e.waitAttempt("the retried delivery", func(a Attempt) bool { return a.Delivery == ids["hook"] })
	if d := e.delivery(a.Delivery); d.Status != catalog.DeliveryDelivered || d.Attempts != 2 {
		t.Fatalf("after the retry: %+v", d)
	}
	if err := n.Retry(t.Context(), ids["hook"]); err == nil {
		t.Fatal("a delivered delivery was retried")
	}
}

// TestGivesUpAfterItsAttempts: a receiver that keeps failing gets the
// configured number of attempts, then the delivery is failed.
func TestGivesUpAfterItsAttempts(t *testing.T) {
	e := newEnv(t)
	hook, target := e.newReceiver("hook", http.StatusServiceUnavailable)
	d := fast
	d.Attempts = 3
	n := e.start(&Config{Targets: []Target{target}, Delivery: d})
	e.emit(n, sampleEvents()[TypeRepositoryFull])
	a := e.waitAttempt("giving up", func(a Attempt) bool { return a.Status == catalog.DeliveryFailed })
	rec := e.delivery(a.Delivery)
	if rec.Attempts != 3 || !strings.Contains(rec.LastError, "HTTP 503: status 503") || len(hook.requests()) != 3 {
		t.Fatalf("record %+v after %d requests", rec, len(hook.requests()))
	}
	ids := map[string]bool{}
	for _, r := range hook.requests() {
		ids[r.header.Get(HeaderDelivery)] = true
	}
	if len(ids) != 1 {
		t.Errorf("retries carried delivery IDs %v, want one", ids)
	}
}

// TestWrongPasswordNeverShown: a rejected SMTP password fails the delivery
// at once, and the password is in no record and no log line.
func TestWrongPasswordNeverShown(t *testing.T) {
	e := newEnv(t)
	srv, target := e.smtp("mail")
	wrong := "wrong-Pa55word"
	target.SMTP.PasswordFile = e.file("wrong.pw", wrong+"\n")
	n := e.start(&Config{Targets: []Target{target}, Delivery: fast})
	e.emit(n, sampleEvents()[TypeTaskFailed])
	a := e.waitAttempt("the failed delivery", func(a Attempt) bool { return a.Status == catalog.DeliveryFailed })
	d := e.delivery(a.Delivery)
	if d.Attempts != 1 || !strings.Contains(d.LastError, "535") {
		t.Fatalf("record %+v", d)
	}
	for what, s := range map[string]string{"record": d.LastError, "logs": e.logs.String()} {
		if strings.Contains(s, wrong) || strings.Contains(s, "s3cret") {
			t.Errorf("the password shows in the %s: %s", what, s)
		}
	}
	if !strings.Contains(e.logs.String(), "notification not delivered") {
		t.Errorf("the failure is not logged: %s", e.logs.String())
	}
	if len(srv.Mails(t)) != 0 {
		t.Fatal("a mail was accepted with a wrong password")
	}
}

package service_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service/configops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestTestNotification: a target created through the API a moment ago
// (the notifier has not reloaded) gets the test message at a real SMTP
// server (aiosmtpd); a target whose server refuses it and a name no
// target has are refused with what to do, and nothing is delivered.
func TestTestNotification(t *testing.T) {
	e := newConfEnv(t, "")
	s, ctx := e.service(), e.ctx
	mail := testutil.StartSMTP(t, testutil.SMTPOptions{TLS: "none", RejectRcpt: "nobody@example.com"})
	target := func(name, to string) {
		t.Helper()
		doc := fmt.Sprintf(`{name: %s, smtp: {host: %s, port: %d, tls: none, from: coffer@example.com, to: [%s]}}`,
			name, mail.Host, mail.Port, to)
		if _, err := servicetest.CreateObject(ctx, s, "notification-target", spec(t, doc)); err != nil {
			t.Fatal(err)
		}
	}
	target("ops", "ops@example.com")
	target("refused", "nobody@example.com")

	doc, err := configops.Ops{Service: s}.TestNotification(ctx, &api.TestNotificationTargetInput{ConfigNameParam: api.ConfigNameParam{Name: "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Target != "ops" || doc.Kind != "smtp" || doc.SentAt.IsZero() {
		t.Errorf("answer %+v", doc)
	}
	mails := mail.Mails(t)
	if len(mails) != 1 || mails[0].RcptTos[0] != "ops@example.com" ||
		!strings.Contains(mails[0].Data, "This is a test of notification target ops.") {
		t.Fatalf("mails %+v", mails)
	}

	_, err = configops.Ops{Service: s}.TestNotification(ctx, &api.TestNotificationTargetInput{ConfigNameParam: api.ConfigNameParam{Name: "refused"}})
	wantClass(t, "a refused message", err, api.Invalid, "the test message was not accepted")
	_, err = configops.Ops{Service: s}.TestNotification(ctx, &api.TestNotificationTargetInput{ConfigNameParam: api.ConfigNameParam{Name: "nope"}})
	wantClass(t, "an unknown target", err, api.NotFound, `no notification target is named "nope"`)
	if n := len(mail.Mails(t)); n != 1 {
		t.Errorf("%d mails after the refusals, want the one test", n)
	}
}

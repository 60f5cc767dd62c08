package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleNotificationTest: the notifications page lists the targets
// and matchers of the file and of the API; "Send test" on a target
// created through the API gets a message to a real SMTP server process
// (aiosmtpd), and a target whose server refuses the recipient shows
// why, with nothing sent.
func TestConsoleNotificationTest(t *testing.T) {
	l := newLab(t)
	mail := testutil.StartSMTP(t, testutil.SMTPOptions{TLS: "none", RejectRcpt: "nobody@example.com"})
	l.config(fmt.Sprintf(`
notifications:
  targets:
    - {name: ops, smtp: {host: %[1]s, port: %[2]d, tls: none, from: coffer@example.com, to: [nobody@example.com]}}
  matchers:
    - {name: failures, targets: [ops], types: [task-failed], labels: {policy: "prod-*"}}
`, mail.Host, mail.Port))
	l.coffer("init")
	team := filepath.Join(l.dir, "team.yaml")
	doc := fmt.Sprintf("{name: backup-team, comment: the backup team's list, smtp: {host: %s, port: %d, tls: none, from: coffer@example.com, to: [team@example.com]}}\n",
		mail.Host, mail.Port)
	if err := os.WriteFile(team, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	l.coffer("config", "create", "notification-target", "-f", team)
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/notifications")
	c.waitText("#targets", "backup-team")
	c.waitText("#targets", "team@example.com")
	c.waitText("#matchers", "policy=prod-*")
	c.run(chromedp.Click("#test-backup-team"))
	c.waitText("#test-result", "backup-team accepted the test message")
	mails := mail.Mails(t)
	if len(mails) != 1 || mails[0].RcptTos[0] != "team@example.com" || !strings.Contains(mails[0].Data, "notification target backup-team") {
		t.Fatalf("the SMTP server received %+v", mails)
	}
	c.shot("notifications")

	c.run(chromedp.Click("#test-ops"))
	c.waitText("#test-result", "not accepted")
	c.waitText("#test-result", "nobody@example.com")
	if n := len(mail.Mails(t)); n != 1 {
		t.Fatalf("%d mails after the refused test", n)
	}
}

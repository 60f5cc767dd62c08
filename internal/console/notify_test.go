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
// why, with nothing sent. A target and a matcher made in the console are
// stored through the API (a target the API refuses shows its message),
// the new target gets its test message, both are changed in place, and
// both are deleted again.
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

	// A target made in the console: refused without a recipient, then
	// made, tested and routed to by a new matcher.
	c.run(chromedp.Click("#new-target summary"), chromedp.SendKeys("#t-name", "oncall"), chromedp.SendKeys("#t-host", mail.Host),
		chromedp.SendKeys("#t-port", fmt.Sprint(mail.Port)), chromedp.SetValue("#t-tls", "none"),
		chromedp.SendKeys("#t-from", "coffer@example.com"), chromedp.Click("#create-target"))
	c.waitText("#target-result", "Failed")
	c.run(chromedp.SendKeys("#t-to", "oncall@example.com"), chromedp.Click("#create-target"))
	c.waitText("#target-result", "The target oncall is added")
	c.open("/ui/notifications")
	c.waitText("#targets", "oncall@example.com")
	c.run(chromedp.Click("#test-oncall"))
	c.waitText("#test-result", "oncall accepted the test message")
	if mails := mail.Mails(t); len(mails) != 2 || mails[1].RcptTos[0] != "oncall@example.com" {
		t.Fatalf("the SMTP server received %+v", mails)
	}
	c.run(chromedp.Click("#new-matcher summary"), chromedp.SendKeys("#m-name", "oncall-failures"),
		chromedp.SendKeys("#m-targets", "oncall"), chromedp.SendKeys("#m-types", "task-failed, rpo-missed"))
	c.run(chromedp.Click("#create-matcher"))
	c.waitText("#matcher-result", "The matcher oncall-failures is added")
	c.open("/ui/notifications")
	c.waitText("#matchers", "oncall-failures")
	c.waitText("#matchers", "task-failed, rpo-missed")
	token := l.adminToken()
	var m struct {
		Source string         `json:"source"`
		Spec   map[string]any `json:"spec"`
	}
	if code := l.get(token, "/api/v1/notifications/matchers/oncall-failures", &m); code != 200 || m.Source != "catalog" ||
		fmt.Sprint(m.Spec["targets"]) != "[oncall]" || fmt.Sprint(m.Spec["types"]) != "[task-failed rpo-missed]" {
		t.Fatalf("the stored matcher (%d): %+v", code, m)
	}

	// Changed in place, at the version the form was read at: the
	// target's recipient (its next test goes there) and the matcher's
	// events.
	c.open("/ui/notifications")
	c.follow("#edit-target-oncall")
	c.waitText("#new-target summary", "Change the target oncall")
	c.run(chromedp.SetValue("#t-to", "pager@example.com"), chromedp.Click("#create-target"))
	c.waitText("#target-result", "The target oncall is changed")
	c.run(chromedp.Click("#test-oncall"))
	c.waitText("#test-result", "oncall accepted the test message")
	if mails := mail.Mails(t); len(mails) != 3 || mails[2].RcptTos[0] != "pager@example.com" {
		t.Fatalf("after the change, the SMTP server received %+v", mails)
	}
	c.open("/ui/notifications")
	c.waitText("#targets", "pager@example.com")
	c.follow("#edit-matcher-oncall-failures")
	c.waitText("#new-matcher summary", "Change the matcher oncall-failures")
	c.run(chromedp.SetValue("#m-types", "task-failed"), chromedp.Click("#create-matcher"))
	c.waitText("#matcher-result", "The matcher oncall-failures is changed")
	if code := l.get(token, "/api/v1/notifications/matchers/oncall-failures", &m); code != 200 ||
		fmt.Sprint(m.Spec["targets"]) != "[oncall]" || fmt.Sprint(m.Spec["types"]) != "[task-failed]" {
		t.Fatalf("the changed matcher (%d): %+v", code, m)
	}
	c.shot("notifications-edit")
	c.run(chromedp.Click("#delete-matcher-oncall-failures"))
	c.waitText("#matcher-result", "The matcher oncall-failures is deleted")
	c.run(chromedp.Click("#delete-target-oncall"))
	c.waitText("#test-result", "The target oncall is deleted")
	c.open("/ui/notifications")
	c.waitText("#targets", "backup-team")
	var left int
	c.run(chromedp.Evaluate(`document.querySelectorAll("#test-oncall, #delete-matcher-oncall-failures").length`, &left))
	if left != 0 {
		t.Fatal("the page still lists the deleted target or matcher")
	}
	for _, path := range []string{"/api/v1/notifications/matchers/oncall-failures", "/api/v1/notifications/targets/oncall"} {
		if code := l.get(token, path, nil); code != 404 {
			t.Fatalf("%s after its delete: %d", path, code)
		}
	}
}

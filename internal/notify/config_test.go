package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/config"
)

func parse(t *testing.T, doc string) (*Config, error) {
	t.Helper()
	f, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return Load(f)
}

const goodConfig = `
notifications:
  targets:
    - name: ops-mail
      comment: the on-call list
      smtp:
        host: mail.example.com
        username: coffer
        password-file: /etc/coffer/smtp.pw
        from: "coffer <coffer@example.com>"
        to: [ops@example.com, backup@example.com]
    - name: chat
      webhook:
        url: https://hooks.example.com/coffer
        secret-file: /etc/coffer/hook.secret
        ca-file: /etc/coffer/ca.pem
    - name: relay
      disable: true
      smtp: {host: localhost, tls: none, from: c@example.com, to: [root@localhost]}
  matchers:
    - name: prod
      targets: [chat]
      types: [task-failed, verify-damage]
      severities: [error, warning]
      labels: {policy: prod-*}
      mode: all
  delivery: {attempts: 5, backoff: 10s, max-backoff: 10m, timeout: 20s, keep: 30d}
`

func TestDecodeGoodConfig(t *testing.T) {
	c, err := parse(t, goodConfig)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Targets) != 3 || len(c.Matchers) != 1 {
		t.Fatalf("decoded %+v", c)
	}
	mail := c.Targets[0]
	if mail.Kind() != "smtp" || mail.SMTP.port() != 587 || mail.SMTP.tlsMode() != StartTLS || len(mail.SMTP.To) != 2 {
		t.Errorf("smtp target %+v", mail.SMTP)
	}
	if c.Targets[1].Kind() != "webhook" || c.Targets[1].Webhook.SecretFile != "/etc/coffer/hook.secret" {
		t.Errorf("webhook target %+v", c.Targets[1].Webhook)
	}
	if relay := c.Targets[2]; !relay.Disable || relay.SMTP.port() != 25 {
		t.Errorf("relay %+v", relay.SMTP)
	}
	d := c.Delivery.WithDefaults()
	if d.Attempts != 5 || time.Duration(d.Backoff) != 10*time.Second || time.Duration(d.Keep) != 30*24*time.Hour {
		t.Errorf("delivery %+v", d)
	}
	// Absent section: nothing configured, nothing wrong.
	c, err = parse(t, "repository: /x\n")
	if err != nil || len(c.Targets) != 0 {
		t.Fatalf("no section: %+v, %v", c, err)
	}
	if d := c.Delivery.WithDefaults(); d.Attempts != DefaultAttempts || time.Duration(d.Timeout) != DefaultTimeout {
		t.Errorf("defaults %+v", d)
	}
}

// TestBadConfig: every mistake is an error that names where it is and
// what to do; several mistakes are reported at once.
func TestBadConfig(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"typo in a target": {`
notifications:
  targets: [{name: a, smtp: {host: h, from: a@b.c, to: [c@d.e], usrname: x}}]`,
			`unknown key "usrname" in notifications.targets[0].smtp (did you mean "username"?)`},
		"typo at the top": {"notifications:\n  matcher: []\n", `line 2: unknown key "matcher" in notifications (did you mean "matchers"?)`},
		"inline password": {`
notifications:
  targets: [{name: a, smtp: {host: h, from: a@b.c, to: [c@d.e], password: hunter2}}]`,
			"line 3: notifications.targets[0].smtp: password: secrets are not written in the configuration: put it alone in a file only coffer can read (chmod 600) and name that file with password-file"},
		"inline webhook secret": {`
notifications:
  targets:
    - name: a
      webhook: {url: "https://x", secret: s}`, "line 5: notifications.targets[0].webhook: secret: secrets are not written"},
		"no destination":     {"notifications:\n  targets: [{name: a}]\n", "target a: no destination: add an smtp: or a webhook: block"},
		"two destinations":   {"notifications:\n  targets: [{name: a, smtp: {host: h, from: a@b.c, to: [c@d.e]}, webhook: {url: 'https://x'}}]\n", "give either smtp or webhook, not both"},
		"duplicate name":     {"notifications:\n  targets: [{name: a, webhook: {url: 'https://x'}}, {name: a, webhook: {url: 'https://y'}}]\n", "target a is defined twice"},
		"missing name":       {"notifications:\n  targets: [{webhook: {url: 'https://x'}}]\n", "target #1: name is missing"},
		"bad name":           {"notifications:\n  targets: [{name: 'a/b', webhook: {url: 'https://x'}}]\n", `target "a/b": a name is 1 to 64 letters`},
		"no host":            {"notifications:\n  targets: [{name: a, smtp: {from: a@b.c, to: [c@d.e]}}]\n", "target a: smtp: host is missing"},
		"host with port":     {"notifications:\n  targets: [{name: a, smtp: {host: 'h:25', from: a@b.c, to: [c@d.e]}}]\n", "the port goes in port:"},
		"bad tls":            {"notifications:\n  targets: [{name: a, smtp: {host: h, tls: ssl, from: a@b.c, to: [c@d.e]}}]\n", `tls "ssl" is not one of starttls, implicit, none`},
		"password in clear":  {"notifications:\n  targets: [{name: a, smtp: {host: h, tls: none, username: u, password-file: /p, from: a@b.c, to: [c@d.e]}}]\n", "would send the password in clear text"},
		"user without pw":    {"notifications:\n  targets: [{name: a, smtp: {host: h, username: u, from: a@b.c, to: [c@d.e]}}]\n", "username and password-file go together"},
		"bad from":           {"notifications:\n  targets: [{name: a, smtp: {host: h, from: nobody, to: [c@d.e]}}]\n", `from "nobody" is not a mail address`},
		"no recipient":       {"notifications:\n  targets: [{name: a, smtp: {host: h, from: a@b.c}}]\n", "to is missing"},
		"bad port":           {"notifications:\n  targets: [{name: a, smtp: {host: h, port: 70000, from: a@b.c, to: [c@d.e]}}]\n", "port 70000 is not a TCP port"},
		"port not a number":  {"notifications:\n  targets: [{name: a, smtp: {host: h, port: smtp, from: a@b.c, to: [c@d.e]}}]\n", "cannot unmarshal"},
		"ftp url":            {"notifications:\n  targets: [{name: a, webhook: {url: 'ftp://x/y'}}]\n", "must start with https://"},
		"url with password":  {"notifications:\n  targets: [{name: a, webhook: {url: 'https://u:p@x/y'}}]\n", "url must not hold credentials"},
		"ca for http":        {"notifications:\n  targets: [{name: a, webhook: {url: 'http://x/y', ca-file: /ca}}]\n", "ca-file makes no sense with an http:// url"},
		"unknown target":     {"notifications:\n  targets: [{name: a, webhook: {url: 'https://x'}}]\n  matchers: [{name: m, targets: [b]}]\n", `matcher m: unknown target "b" (known: a)`},
		"matcher no targets": {"notifications:\n  matchers: [{name: m}]\n", "matcher m: targets is missing"},
		"unknown type":       {"notifications:\n  targets: [{name: a, webhook: {url: 'https://x'}}]\n  matchers: [{name: m, targets: [a], types: [task-failure]}]\n", `types: "task-failure" is not an event type (task-failed, task-succeeded`},
		"unknown severity":   {"notifications:\n  targets: [{name: a, webhook: {url: 'https://x'}}]\n  matchers: [{name: m, targets: [a], severities: [critical]}]\n", `"critical" is not a severity`},
		"bad glob":           {"notifications:\n  targets: [{name: a, webhook: {url: 'https://x'}}]\n  matchers: [{name: m, targets: [a], labels: {vm: '[web'}}]\n", `labels.vm: "[web" is not a pattern`},
		"bad mode":           {"notifications:\n  targets: [{name: a, webhook: {url: 'https://x'}}]\n  matchers: [{name: m, targets: [a], mode: some}]\n", `mode "some" is not all or any`},
		"bad duration":       {"notifications:\n  delivery: {backoff: soon}\n", `line 2: "soon" is not a duration (like 30s, 1h or 90d)`},
		"backoff order":      {"notifications:\n  delivery: {backoff: 1h, max-backoff: 1m}\n", "max-backoff (1m0s) is shorter than backoff (1h0m0s)"},
		"negative attempts":  {"notifications:\n  delivery: {attempts: -1}\n", "delivery.attempts must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "section notifications: ") {
				t.Errorf("error does not name the section: %v", err)
			}
		})
	}
	// All problems at once.
	_, err := parse(t, "notifications:\n  targets: [{name: a, smtp: {tls: x}}]\n  matchers: [{name: m, targets: [z]}]\n")
	for _, want := range []string{"host is missing", `tls "x"`, "from is missing", "to is missing", `unknown target "z"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("joined errors %v lack %q", err, want)
		}
	}
}

// TestEdits: the API's edits keep the configuration valid and leave the
// original as it was when they are refused.
func TestEdits(t *testing.T) {
	c, err := parse(t, goodConfig)
	if err != nil {
		t.Fatal(err)
	}
	hook := Target{Name: "pager", Webhook: &WebhookTarget{URL: "https://pager.example.com/hook"}}
	n, err := c.PutTarget(hook)
	if err != nil || len(n.Targets) != 4 || len(c.Targets) != 3 {
		t.Fatalf("add target: %d targets (original %d), %v", len(n.Targets), len(c.Targets), err)
	}
	hook.Webhook = &WebhookTarget{URL: "https://pager.example.com/v2"}
	if n, err = n.PutTarget(hook); err != nil || n.Targets[3].Webhook.URL != "https://pager.example.com/v2" {
		t.Fatalf("replace target: %+v, %v", n.Targets, err)
	}
	if _, err := n.PutTarget(Target{Name: "bad", Webhook: &WebhookTarget{URL: "gopher://x"}}); err == nil {
		t.Fatal("an invalid target was accepted")
	}
	if _, err := n.DeleteTarget("chat"); err == nil || !strings.Contains(err.Error(), "used by matcher(s) prod") {
		t.Fatalf("delete of a target a matcher names: %v", err)
	}
	if _, err := n.DeleteTarget("nope"); err == nil {
		t.Fatal("delete of a missing target succeeded")
	}
	if _, err := n.PutMatcher(Matcher{Name: "m", Targets: []string{"nope"}}); err == nil {
		t.Fatal("a matcher naming a missing target was accepted")
	}
	m, err := n.PutMatcher(Matcher{Name: "all-to-pager", Targets: []string{"pager"}})
	if err != nil || len(m.Matchers) != 2 || len(n.Matchers) != 1 {
		t.Fatalf("add matcher: %+v, %v", m.Matchers, err)
	}
	if m, err = m.DeleteMatcher("prod"); err != nil {
		t.Fatal(err)
	}
	if m, err = m.DeleteTarget("chat"); err != nil || len(m.Targets) != 3 {
		t.Fatalf("delete target once unused: %+v, %v", m.Targets, err)
	}
	if _, ok := c.Target("chat"); !ok {
		t.Fatal("an edit changed the original configuration")
	}
}

func TestRetryWait(t *testing.T) {
	d := Delivery{Backoff: Duration(time.Second), MaxBackoff: Duration(10 * time.Second)}
	for attempt, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		4: 8 * time.Second, 5: 10 * time.Second, 40: 10 * time.Second} {
		seen := map[time.Duration]bool{}
		for range 50 {
			w := d.RetryWait(attempt)
			if w < full/2 || w > full {
				t.Fatalf("attempt %d: wait %s outside [%s, %s]", attempt, w, full/2, full)
			}
			seen[w] = true
		}
		if len(seen) < 2 {
			t.Errorf("attempt %d: 50 waits without jitter: %v", attempt, seen)
		}
	}
}

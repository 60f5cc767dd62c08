package notify

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Validate checks the whole section and returns every problem at once,
// each naming the target or matcher and the key. It reads no file: the
// secret and CA files are read when a target is built (New, SendTest), by
// the process that sends.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	targets := map[string]bool{}
	for i, t := range c.Targets {
		checkName("target", i, t.Name, targets, add)
		if err := t.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	matchers := map[string]bool{}
	for i, m := range c.Matchers {
		checkName("matcher", i, m.Name, matchers, add)
		if err := m.Validate(targets); err != nil {
			errs = append(errs, err)
		}
	}
	d := c.Delivery
	if d.Attempts < 0 {
		add("delivery.attempts must not be negative")
	}
	if d.Backoff < 0 || d.MaxBackoff < 0 || d.Timeout < 0 || d.Keep < 0 {
		add("delivery: durations must not be negative")
	}
	if d.Backoff > 0 && d.MaxBackoff > 0 && d.MaxBackoff < d.Backoff {
		add("delivery: max-backoff (%s) is shorter than backoff (%s)", d.MaxBackoff, d.Backoff)
	}
	return errors.Join(errs...)
}

// namePattern keeps names usable in API paths and file names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkName(what string, i int, name string, seen map[string]bool, add func(string, ...any)) {
	switch {
	case name == "":
		add("%s #%d: name is missing", what, i+1)
	case !namePattern.MatchString(name):
		add("%s %q: a name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", what, name)
	case seen[name]:
		add("%s %s is defined twice", what, name)
	}
	seen[name] = true
}

// Validate checks one target on its own (the API checks a target it is
// given with this, then the whole configuration it would make).
func (t Target) Validate() error {
	where := "target " + t.Name
	switch {
	case t.SMTP != nil && t.Webhook != nil:
		return fmt.Errorf("%s: give either smtp or webhook, not both (one target is one destination)", where)
	case t.SMTP != nil:
		return t.SMTP.validate(where + ": smtp")
	case t.Webhook != nil:
		return t.Webhook.validate(where + ": webhook")
	}
	return fmt.Errorf("%s: no destination: add an smtp: or a webhook: block", where)
}

func (s *SMTPTarget) validate(where string) error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(where+": "+format, a...)) }
	if s.Host == "" {
		add("host is missing (the mail server's name)")
	} else if strings.ContainsAny(s.Host, ":/ ") && net.ParseIP(s.Host) == nil {
		add("host %q must be a name or an address alone (the port goes in port:)", s.Host)
	}
	if s.Port < 0 || s.Port > 65535 {
		add("port %d is not a TCP port (1-65535)", s.Port)
	}
	if !slices.Contains([]string{"", StartTLS, ImplicitTLS, NoTLS}, s.TLS) {
		add("tls %q is not one of %s, %s, %s", s.TLS, StartTLS, ImplicitTLS, NoTLS)
	}
	if s.TLS == NoTLS && s.PasswordFile != "" {
		add("tls: none would send the password in clear text: use starttls or implicit")
	}
	if s.TLS == NoTLS && s.CAFile != "" {
		add("ca-file makes no sense with tls: none")
	}
	if (s.Username == "") != (s.PasswordFile == "") {
		add("username and password-file go together (give both, or neither for a server without AUTH)")
	}
	if s.From == "" {
		add("from is missing (the sender address)")
	} else if _, err := mail.ParseAddress(s.From); err != nil {
		add("from %q is not a mail address: %v", s.From, err)
	}
	if len(s.To) == 0 {
		add("to is missing (one or more recipient addresses)")
	}
	for _, a := range s.To {
		if _, err := mail.ParseAddress(a); err != nil {
			add("to %q is not a mail address: %v", a, err)
		}
	}
	return errors.Join(errs...)
}

func (w *WebhookTarget) validate(where string) error {
	if w.URL == "" {
		return fmt.Errorf("%s: url is missing", where)
	}
	u, err := url.Parse(w.URL)
	switch {
	case err != nil:
		return fmt.Errorf("%s: url: %v", where, err)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%s: url %q must start with https:// (or http:// for a receiver on a trusted network)", where, w.URL)
	case u.Host == "":
		return fmt.Errorf("%s: url %q has no host", where, w.URL)
	case u.User != nil:
		// Credentials in the URL would show in the configuration, in
		// `coffer config show` and in errors.
		return fmt.Errorf("%s: url must not hold credentials: receivers authenticate coffer by the signature (secret-file)", where)
	case u.Fragment != "":
		return fmt.Errorf("%s: url %q has a #fragment, which is never sent", where, w.URL)
	case w.CAFile != "" && u.Scheme != "https":
		return fmt.Errorf("%s: ca-file makes no sense with an http:// url", where)
	}
	return nil
}

// Validate checks one matcher against the names of the targets there are.
func (m Matcher) Validate(targets map[string]bool) error {
	var errs []error
	where := "matcher " + m.Name
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(where+": "+format, a...)) }
	if len(m.Targets) == 0 {
		add("targets is missing (the targets that get what this matcher matches)")
	}
	for _, t := range m.Targets {
		if !targets[t] {
			add("unknown target %q%s", t, known(targets))
		}
	}
	for _, t := range m.Types {
		if !slices.Contains(Types, t) || t == TypeTest {
			add("types: %q is not an event type (%s)", t, typeList())
		}
	}
	for _, s := range m.Severities {
		if !slices.Contains(Severities, s) {
			add("severities: %q is not a severity (info, notice, warning, error)", s)
		}
	}
	for k, g := range m.Labels {
		if k == "" {
			add("labels: empty label name")
		}
		if _, err := path.Match(g, ""); err != nil || g == "" {
			add("labels.%s: %q is not a pattern (like prod-* or web-0?)", k, g)
		}
	}
	if !slices.Contains([]string{"", "all", "any"}, m.Mode) {
		add("mode %q is not all or any", m.Mode)
	}
	return errors.Join(errs...)
}

func typeList() string {
	var s []string
	for _, t := range Types {
		if t != TypeTest {
			s = append(s, string(t))
		}
	}
	return strings.Join(s, ", ")
}

func known(set map[string]bool) string {
	var list []string
	for k := range set {
		if k != "" {
			list = append(list, k)
		}
	}
	if len(list) == 0 {
		return " (no target is configured)"
	}
	sort.Strings(list)
	return " (known: " + strings.Join(list, ", ") + ")"
}

package notify

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/config"
)

// Section is the configuration file's key of the notifications.
const Section = "notifications"

// Config is the notifications: section (and, later, what the API stores:
// the same types, checked by the same Validate).
//
//	notifications:
//	  targets:
//	    - name: ops-mail
//	      smtp:
//	        host: mail.example.com
//	        port: 587                 # default: 587 (starttls), 465 (implicit), 25 (none)
//	        tls: starttls             # starttls (default), implicit, none
//	        username: coffer
//	        password-file: /etc/coffer/smtp.pw
//	        from: coffer@example.com
//	        to: [ops@example.com]
//	    - name: chat
//	      webhook:
//	        url: https://hooks.example.com/coffer
//	        secret-file: /etc/coffer/hook.secret   # signs the body (HMAC-SHA256)
//	        ca-file: /etc/coffer/hooks-ca.pem
//	  matchers:
//	    - name: prod-to-chat
//	      targets: [chat]
//	      types: [task-failed, verify-damage]
//	      severities: [error]
//	      labels: {policy: prod-*}
//	  delivery: {attempts: 10, backoff: 30s, max-backoff: 1h, timeout: 30s, keep: 90d}
type Config struct {
	Targets  []Target  `yaml:"targets,omitempty" json:"targets"`
	Matchers []Matcher `yaml:"matchers,omitempty" json:"matchers"`
	Delivery Delivery  `yaml:"delivery,omitempty" json:"delivery"`
}

// Target is where notifications go: exactly one of SMTP and Webhook.
type Target struct {
	Name    string         `yaml:"name" json:"name"`
	Comment string         `yaml:"comment,omitempty" json:"comment,omitempty"`
	Disable bool           `yaml:"disable,omitempty" json:"disable,omitempty"`
	SMTP    *SMTPTarget    `yaml:"smtp,omitempty" json:"smtp,omitempty"`
	Webhook *WebhookTarget `yaml:"webhook,omitempty" json:"webhook,omitempty"`
}

// Kind is "smtp" or "webhook".
func (t Target) Kind() string {
	switch {
	case t.SMTP != nil:
		return "smtp"
	case t.Webhook != nil:
		return "webhook"
	}
	return ""
}

// TLS modes of SMTP targets.
const (
	StartTLS    = "starttls" // plain connection upgraded with STARTTLS, which is required
	ImplicitTLS = "implicit" // TLS from the first byte (SMTPS, port 465)
	NoTLS       = "none"     // no encryption (a relay on the same host); no password allowed
)

// SMTPTarget mails notifications. The password is read from a file when
// sending, never kept in the configuration.
type SMTPTarget struct {
	Host         string   `yaml:"host" json:"host"`
	Port         int      `yaml:"port,omitempty" json:"port,omitempty"`
	TLS          string   `yaml:"tls,omitempty" json:"tls,omitempty"`
	CAFile       string   `yaml:"ca-file,omitempty" json:"ca_file,omitempty"`
	Username     string   `yaml:"username,omitempty" json:"username,omitempty"`
	PasswordFile string   `yaml:"password-file,omitempty" json:"password_file,omitempty"`
	From         string   `yaml:"from" json:"from"`
	To           []string `yaml:"to" json:"to"`
}

// tlsMode is TLS with its default.
func (s SMTPTarget) tlsMode() string {
	if s.TLS == "" {
		return StartTLS
	}
	return s.TLS
}

// port is Port with the default of the TLS mode.
func (s SMTPTarget) port() int {
	if s.Port != 0 {
		return s.Port
	}
	switch s.tlsMode() {
	case ImplicitTLS:
		return 465
	case NoTLS:
		return 25
	}
	return 587
}

// WebhookTarget posts notifications as JSON. With a secret, the body is
// signed (header X-Coffer-Signature-256: sha256=<hex HMAC-SHA256>).
type WebhookTarget struct {
	URL        string `yaml:"url" json:"url"`
	SecretFile string `yaml:"secret-file,omitempty" json:"secret_file,omitempty"`
	CAFile     string `yaml:"ca-file,omitempty" json:"ca_file,omitempty"`
}

// Matcher routes the events it matches to its targets. Its conditions
// are the event's type (one of Types), severity (one of Severities) and
// labels (each a glob the label's value must match); with mode all (the
// default) every condition given must hold, with any one of them. A
// matcher with no condition matches every event. Invert negates it.
type Matcher struct {
	Name       string            `yaml:"name" json:"name"`
	Comment    string            `yaml:"comment,omitempty" json:"comment,omitempty"`
	Disable    bool              `yaml:"disable,omitempty" json:"disable,omitempty"`
	Targets    []string          `yaml:"targets" json:"targets"`
	Types      []Type            `yaml:"types,omitempty" json:"types,omitempty"`
	Severities []Severity        `yaml:"severities,omitempty" json:"severities,omitempty"`
	Labels     map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	Mode       string            `yaml:"mode,omitempty" json:"mode,omitempty"` // all (default), any
	Invert     bool              `yaml:"invert,omitempty" json:"invert,omitempty"`
}

// Delivery tunes sending; zero fields take the defaults below.
type Delivery struct {
	// Attempts bounds the attempts of one delivery before it is failed.
	Attempts int `yaml:"attempts,omitempty" json:"attempts,omitempty"`
	// Backoff is the wait after the first failed attempt, doubled after
	// each further one up to MaxBackoff, with jitter.
	Backoff    Duration `yaml:"backoff,omitempty" json:"backoff,omitempty"`
	MaxBackoff Duration `yaml:"max-backoff,omitempty" json:"max_backoff,omitempty"`
	// Timeout bounds one attempt.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Keep is how long the records of finished deliveries are kept.
	Keep Duration `yaml:"keep,omitempty" json:"keep,omitempty"`
}

// Defaults of Delivery.
const (
	DefaultAttempts   = 10
	DefaultBackoff    = 30 * time.Second
	DefaultMaxBackoff = time.Hour
	DefaultTimeout    = 30 * time.Second
	DefaultKeep       = 90 * 24 * time.Hour
)

// WithDefaults fills the unset fields.
func (d Delivery) WithDefaults() Delivery {
	set := func(p *Duration, v time.Duration) {
		if *p == 0 {
			*p = Duration(v)
		}
	}
	if d.Attempts == 0 {
		d.Attempts = DefaultAttempts
	}
	set(&d.Backoff, DefaultBackoff)
	set(&d.MaxBackoff, DefaultMaxBackoff)
	set(&d.Timeout, DefaultTimeout)
	set(&d.Keep, DefaultKeep)
	return d
}

// Decode reads the notifications: section strictly: a key the schema does
// not have is an error naming its line and the closest known key. It does
// not check what the section says (Validate does); every command decodes
// it when it loads the file, so no typo is ever ignored.
func Decode(f *config.File) (*Config, error) {
	var n yaml.Node
	if err := f.Decode(Section, &n); err != nil {
		return nil, err
	}
	c := &Config{}
	if n.Kind == 0 {
		return c, nil
	}
	if err := DecodeNode(&n, c); err != nil {
		return nil, fmt.Errorf("config %s: section %s: %w", f.Path, Section, err)
	}
	return c, nil
}

// Load decodes and validates the section.
func Load(f *config.File) (*Config, error) {
	c, err := Decode(f)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: section %s: %w", f.Path, Section, err)
	}
	return c, nil
}

// DecodeNode decodes a notifications: mapping strictly. A secret written
// into the file (password:, secret:) is refused with where to put it
// instead, before the schema's own "unknown key".
func DecodeNode(n *yaml.Node, c *Config) error {
	if err := refuseInlineSecrets(n); err != nil {
		return err
	}
	return config.DecodeNode(n, c, Section)
}

// refuseInlineSecrets finds password: or secret: in a target, the one
// mistake whose "unknown key" would not say what to do.
func refuseInlineSecrets(n *yaml.Node) error {
	targets := mappingValue(n, "targets")
	if targets == nil || targets.Kind != yaml.SequenceNode {
		return nil
	}
	for i, t := range targets.Content {
		for kind, keys := range map[string][2]string{"smtp": {"password", "password-file"}, "webhook": {"secret", "secret-file"}} {
			block := mappingValue(t, kind)
			if k := mappingKey(block, keys[0]); k != nil {
				return fmt.Errorf("line %d: %s.targets[%d].%s: %s: secrets are not written in the configuration: "+
					"put it alone in a file only coffer can read (chmod 600) and name that file with %s",
					k.Line, Section, i, kind, keys[0], keys[1])
			}
		}
	}
	return nil
}

func mappingKey(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Target returns the target with that name.
func (c *Config) Target(name string) (Target, bool) {
	for _, t := range c.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

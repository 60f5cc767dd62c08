package notify

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"sort"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"
)

// smtpSender mails an event as a plain-text message.
type smtpSender struct {
	target string
	cfg    SMTPTarget
}

func (s *smtpSender) check() error {
	if _, err := tlsConfig(s.cfg.Host, s.cfg.CAFile); err != nil {
		return err
	}
	if s.cfg.PasswordFile != "" {
		_, err := readSecret(s.cfg.PasswordFile, "password-file")
		return err
	}
	return nil
}

func (s *smtpSender) Send(ctx context.Context, ev Event, delivery int64, timeout time.Duration) error {
	msg, err := s.message(ev, delivery)
	if err != nil {
		return permanentError{err}
	}
	tlsCfg, err := tlsConfig(s.cfg.Host, s.cfg.CAFile)
	if err != nil {
		return err
	}
	opts := []mail.Option{mail.WithPort(s.cfg.port()), mail.WithTimeout(timeout), mail.WithTLSConfig(tlsCfg)}
	switch s.cfg.tlsMode() {
	case ImplicitTLS:
		opts = append(opts, mail.WithSSL())
	case NoTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		pw, err := readSecret(s.cfg.PasswordFile, "password-file")
		if err != nil {
			return err
		}
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(s.cfg.Username),
			mail.WithPassword(pw))
	}
	c, err := mail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return permanentError{fmt.Errorf("smtp: %w", err)}
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		err = fmt.Errorf("smtp %s:%d: %w", s.cfg.Host, s.cfg.port(), err)
		if smtpRefused(err) {
			return permanentError{err}
		}
		return err
	}
	return nil
}

// smtpRefused recognises a permanent refusal (a 5xx reply: unknown
// recipient, sender refused, authentication failed); connection errors
// and 4xx replies are worth retrying.
func smtpRefused(err error) bool {
	var se *mail.SendError
	if errors.As(err, &se) && se.ErrorCode() >= 500 {
		return true
	}
	var te *textproto.Error
	return errors.As(err, &te) && te.Code >= 500
}

func (s *smtpSender) message(ev Event, delivery int64) (*mail.Msg, error) {
	m := mail.NewMsg()
	if err := m.From(s.cfg.From); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if err := m.To(s.cfg.To...); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	m.Subject(MailSubject(ev))
	m.SetDate()
	m.SetMessageID()
	m.SetUserAgent("coffer")
	m.SetGenHeader("X-Coffer-Event", string(ev.Type))
	m.SetGenHeader("X-Coffer-Severity", string(ev.Severity))
	m.SetBodyString(mail.TypeTextPlain, Text(ev, s.target, delivery))
	return m, nil
}

// MailSubject is the mail subject of an event.
func MailSubject(ev Event) string {
	return fmt.Sprintf("[coffer] %s: %s", ev.Severity, ev.Title)
}

// Text is an event as plain text: the title, the details, then the
// fields every event has.
func Text(ev Event, target string, delivery int64) string {
	var b strings.Builder
	b.WriteString(ev.Title + "\n\n")
	if ev.Body != "" {
		b.WriteString(ev.Body + "\n")
	}
	fmt.Fprintf(&b, "Severity: %s\nType: %s\nTime: %s\nObject: %s\n", ev.Severity, ev.Type,
		ev.Time.UTC().Format(time.RFC3339), ev.Object)
	if len(ev.Labels) > 0 {
		keys := make([]string, 0, len(ev.Labels))
		for k := range ev.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = k + "=" + ev.Labels[k]
		}
		fmt.Fprintf(&b, "Labels: %s\n", strings.Join(keys, " "))
	}
	fmt.Fprintf(&b, "\n-- \ncoffer notification: event %d, delivery %d, target %s\n", ev.ID, delivery, target)
	return b.String()
}

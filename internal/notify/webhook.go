package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// WebhookVersion is the version of the webhook body; a change that is not
// a new field raises it.
const WebhookVersion = 1

// Webhook headers.
const (
	HeaderSignature = "X-Coffer-Signature-256" // sha256=<hex HMAC-SHA256 of the body>, with a secret
	HeaderEvent     = "X-Coffer-Event"         // the event type
	HeaderDelivery  = "X-Coffer-Delivery"      // the delivery ID: the same on every retry
)

// WebhookBody is what a webhook target receives: the event with the
// version of this document and the delivery (docs/notifications.md).
type WebhookBody struct {
	Version  int    `json:"version"`
	Delivery int64  `json:"delivery"`
	Target   string `json:"target"`
	Event
}

// Sign is the signature header's value for body and secret; receivers
// compute the same and compare in constant time (hmac.Equal).
func Sign(body []byte, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// webhookSender posts an event as JSON.
type webhookSender struct {
	target string
	cfg    WebhookTarget
}

func (w *webhookSender) check() error {
	if _, err := tlsConfig("", w.cfg.CAFile); err != nil {
		return err
	}
	if w.cfg.SecretFile != "" {
		_, err := readSecret(w.cfg.SecretFile, "secret-file")
		return err
	}
	return nil
}

func (w *webhookSender) Send(ctx context.Context, ev Event, delivery int64, timeout time.Duration) error {
	body, err := json.Marshal(WebhookBody{Version: WebhookVersion, Delivery: delivery, Target: w.target, Event: ev})
	if err != nil {
		return permanentError{err}
	}
	tlsCfg, err := tlsConfig("", w.cfg.CAFile)
	if err != nil {
		return err
	}
	client := &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment},
		// A redirected POST would carry the signed body to a URL nobody
		// configured: the redirect is reported instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "coffer")
	req.Header.Set(HeaderEvent, string(ev.Type))
	req.Header.Set(HeaderDelivery, strconv.FormatInt(delivery, 10))
	if w.cfg.SecretFile != "" {
		secret, err := readSecret(w.cfg.SecretFile, "secret-file")
		if err != nil {
			return err
		}
		req.Header.Set(HeaderSignature, Sign(body, secret))
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the method and URL, said once below
		}
		return fmt.Errorf("webhook %s: %w", w.cfg.URL, err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code >= 300 && code < 400:
		return permanentError{fmt.Errorf("webhook %s: redirected (HTTP %d) to %q: configure the final URL",
			w.cfg.URL, code, resp.Header.Get("Location"))}
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return fmt.Errorf("webhook %s: HTTP %d: %s", w.cfg.URL, code, bytes.TrimSpace(reply))
	default:
		return permanentError{fmt.Errorf("webhook %s: refused with HTTP %d: %s (fix the target or the receiver, then retry the delivery)",
			w.cfg.URL, code, bytes.TrimSpace(reply))}
	}
}

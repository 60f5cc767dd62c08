package server

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Settings are the server: section of the configuration file, decoded as
// strictly as every section (an unknown key is an error).
type Settings struct {
	// Listen is the address the API is served on (default
	// 127.0.0.1:8443: set it to serve other hosts).
	Listen string `yaml:"listen"`
	// PublicURL is the server's address as users reach it (default:
	// https://LISTEN), for the setup links it prints.
	PublicURL string `yaml:"public-url"`
	// TLSCert and TLSKey are a certificate and key (PEM) to serve with
	// instead of the self-signed certificate made at the first start.
	TLSCert string `yaml:"tls-cert"`
	TLSKey  string `yaml:"tls-key"`
	// InsecureHTTP serves plain HTTP, only on a loopback address (behind
	// a TLS-terminating proxy on the same host).
	InsecureHTTP bool `yaml:"insecure-http"`
	// SessionIdle and SessionLifetime end browser sessions (defaults 30m
	// and 8h); MaxTokenLifetime bounds API tokens' expiry (365d).
	SessionIdle      policy.Duration `yaml:"session-idle"`
	SessionLifetime  policy.Duration `yaml:"session-lifetime"`
	MaxTokenLifetime policy.Duration `yaml:"max-token-lifetime"`
	// DrainTimeout is how long SIGTERM lets running requests and
	// background work finish before they are cancelled (default 5m).
	DrainTimeout policy.Duration `yaml:"drain-timeout"`
	// RestoreDir receives what API requests restore on the server
	// (default: STATE-DIR/restores); ImageDir holds the disk images the
	// API may back up (default: none, and backup-disk is refused).
	RestoreDir string `yaml:"restore-dir"`
	ImageDir   string `yaml:"image-dir"`
	// RequireSecondFactor names the roles whose users must sign in with
	// a second factor (absent: Admin and RepositoryAdmin; [] none).
	RequireSecondFactor *[]string `yaml:"require-second-factor"`
}

// Defaults.
const (
	DefaultListen       = "127.0.0.1:8443"
	DefaultDrainTimeout = 5 * time.Minute
)

// Check validates the settings and fills in the defaults that do not
// depend on the state directory.
func (s *Settings) Check() error {
	if s.Listen == "" {
		s.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return fmt.Errorf("server.listen: %q is not HOST:PORT (like 127.0.0.1:8443 or :8443): %v", s.Listen, err)
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return fmt.Errorf("server.tls-cert and server.tls-key go together: give both, or neither for a self-signed certificate")
	}
	for _, f := range []struct{ key, path string }{{"server.tls-cert", s.TLSCert}, {"server.tls-key", s.TLSKey}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %v", f.key, err)
		}
	}
	if s.InsecureHTTP && s.TLSCert != "" {
		return fmt.Errorf("server.insecure-http and server.tls-cert exclude each other: plain HTTP serves no certificate")
	}
	if s.PublicURL != "" {
		u, err := url.Parse(s.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("server.public-url: %q is not a URL like https://backup.example.com:8443", s.PublicURL)
		}
	}
	idle, life := s.sessionIdle(), s.sessionLifetime()
	if idle > life {
		return fmt.Errorf("server.session-idle %s is longer than server.session-lifetime %s", policy.Duration(idle), policy.Duration(life))
	}
	if _, err := s.secondFactorRoles(); err != nil {
		return err
	}
	if s.DrainTimeout == 0 {
		s.DrainTimeout = policy.Duration(DefaultDrainTimeout)
	}
	return nil
}

func (s *Settings) sessionIdle() time.Duration {
	return cmpOr(time.Duration(s.SessionIdle), auth.DefaultSessionIdle)
}

func (s *Settings) sessionLifetime() time.Duration {
	return cmpOr(time.Duration(s.SessionLifetime), auth.DefaultSessionLifetime)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// secondFactorRoles are the roles server.require-second-factor names.
func (s *Settings) secondFactorRoles() ([]auth.Role, error) {
	if s.RequireSecondFactor == nil {
		return auth.DefaultRequireSecondFactor, nil
	}
	roles := []auth.Role{}
	for _, name := range *s.RequireSecondFactor {
		r, err := auth.ParseRole(name)
		if err != nil {
			return nil, fmt.Errorf("server.require-second-factor: %v", err)
		}
		roles = append(roles, r)
	}
	return roles, nil
}

// AuthOptions are the access control's options the settings set (Check
// has refused unknown roles); the second-factor key comes from the state
// directory.
func (s *Settings) AuthOptions() auth.Options {
	roles, _ := s.secondFactorRoles()
	return auth.Options{SessionIdle: s.sessionIdle(), SessionLifetime: s.sessionLifetime(),
		MaxTokenLifetime: time.Duration(s.MaxTokenLifetime), RequireSecondFactor: roles}
}

// URL is where the server is reached: PublicURL, or the address it
// listens on (listen: its port chosen) with the scheme it serves. A host
// name in server.listen stays that name (security keys are refused at an
// IP address); a wildcard address is named by the host's name.
func (s *Settings) URL(listen string) string {
	if s.PublicURL != "" {
		return strings.TrimRight(s.PublicURL, "/")
	}
	scheme := "https"
	if s.InsecureHTTP {
		scheme = "http"
	}
	host, port, _ := net.SplitHostPort(listen)
	if name, _, _ := net.SplitHostPort(s.Listen); name != "" && net.ParseIP(name) == nil {
		host = name
	}
	if wildcard(host) {
		host, _ = os.Hostname()
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// CertificateHosts are the names a self-signed certificate is made for:
// the listen address's host, and the host's name when it listens on every
// address.
func (s *Settings) CertificateHosts() []string {
	host, _, _ := net.SplitHostPort(s.Listen)
	if wildcard(host) {
		h, _ := os.Hostname()
		return []string{h}
	}
	if u, err := url.Parse(s.PublicURL); err == nil && u.Hostname() != "" {
		return []string{host, u.Hostname()}
	}
	return []string{host}
}

func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// CheckPlainHTTP refuses plain HTTP on anything but a loopback address:
// passwords, tokens and backed-up data would cross the network in the
// clear.
func CheckPlainHTTP(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("plain HTTP (--insecure-http, server.insecure-http) is served on a loopback address only, "+
		"not %s: sign-ins, tokens and backed-up data would cross the network in the clear; serve HTTPS "+
		"(the default), or listen on 127.0.0.1 behind a TLS-terminating proxy", listen)
}

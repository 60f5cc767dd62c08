// Package config reads coffer's configuration file and resolves settings
// with one precedence everywhere: command-line flag > environment variable
// > configuration file > built-in default.
//
// Every scalar setting is declared once, in the Keys table, with its file
// key, flag, environment variable, default and help text; nothing else in
// coffer names an environment variable. Structured sections (see Sections)
// are decoded by their owners with Decode, as strictly as scalar keys.
//
// The file is YAML. It is looked up in order: --config, $COFFER_CONFIG,
// $XDG_CONFIG_HOME/coffer/config.yaml (~/.config/coffer/config.yaml),
// /etc/coffer/coffer.yaml. Unknown keys are errors, so a typo never silently
// falls back to a default.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Key declares one scalar setting.
type Key struct {
	Name    string // file key; dots nest ("s3.endpoint")
	Flag    string // long flag name, "" if none (secrets never get flags)
	Env     string // environment variable, "" if none
	Default string
	Usage   string
	Secret  bool // never printed by `coffer config show`
}

// Keys is the table of every scalar setting.
var Keys = []Key{
	{Name: "repository", Flag: "repo", Env: "COFFER_REPO", Usage: "repository: a directory, s3://bucket/prefix, or https://host:port (a repository server)"},
	{Name: "password-file", Flag: "password-file", Env: "COFFER_PASSWORD_FILE", Usage: "file holding the repository password"},
	{Name: "password", Env: "COFFER_PASSWORD", Secret: true, Usage: "repository password (prefer password-file)"},
	{Name: "copy-target-password-file", Flag: "to-password-file", Env: "COFFER_TO_PASSWORD_FILE", Usage: "password file of the target repository of `coffer copy` / source of `init --copy-keys-from`"},
	{Name: "copy-target-password", Env: "COFFER_TO_PASSWORD", Secret: true, Usage: "password of that other repository"},
	{Name: "catalog", Flag: "catalog", Env: "COFFER_CATALOG", Usage: "catalog: a SQLite file or a postgres://... DSN (default: catalog.db in state-dir if set, else $XDG_STATE_HOME/coffer/ or ~/.local/state/coffer/; /var/lib/coffer/ for root)"},
	{Name: "cache-dir", Flag: "cache-dir", Env: "COFFER_CACHE_DIR", Default: "~/.cache/coffer", Usage: "local cache directory (repository metadata, guest images)"},
	{Name: "cache-max-size", Flag: "cache-max-size", Env: "COFFER_CACHE_MAX_SIZE", Default: "2GiB", Usage: "bound of the metadata cache of each remote repository (0 disables it)"},
	{Name: "cache-min-free", Flag: "cache-min-free", Env: "COFFER_CACHE_MIN_FREE", Default: "1GiB", Usage: "free space the metadata cache always leaves on its filesystem"},
	{Name: "log-level", Flag: "log-level", Env: "COFFER_LOG_LEVEL", Default: "warn", Usage: "log level: debug, info, warn, error"},
	{Name: "log-format", Flag: "log-format", Env: "COFFER_LOG_FORMAT", Default: "text", Usage: "log format: text or json"},
	{Name: "tracing.otlp-endpoint", Env: "COFFER_OTLP_ENDPOINT", Usage: "send OpenTelemetry traces of operations and API requests to this collector's OTLP/HTTP address (http://127.0.0.1:4318); empty: no tracing"},
	{Name: "state-dir", Flag: "state-dir", Env: "COFFER_STATE_DIR", Default: "~/.local/state/coffer", Usage: "directory for coffer's journals of hypervisor objects it created"},
	{Name: "s3.endpoint", Flag: "s3-endpoint", Env: "COFFER_S3_ENDPOINT", Usage: "S3 endpoint URL (default: AWS)"},
	{Name: "s3.region", Flag: "s3-region", Env: "COFFER_S3_REGION", Usage: "S3 region"},
	{Name: "s3.path-style", Flag: "s3-path-style", Env: "COFFER_S3_PATH_STYLE", Default: "false", Usage: "use path-style S3 URLs (most self-hosted servers)"},
	{Name: "s3.access-key-id", Env: "COFFER_S3_ACCESS_KEY_ID", Usage: "S3 access key (default: the AWS credential chain)"},
	{Name: "s3.secret-access-key", Env: "COFFER_S3_SECRET_ACCESS_KEY", Secret: true, Usage: "S3 secret key"},
	{Name: "s3.ca-file", Flag: "s3-ca-file", Env: "COFFER_S3_CA_FILE", Usage: "PEM file of CAs trusted for the S3 endpoint"},
	{Name: "s3.connections", Flag: "s3-connections", Env: "COFFER_S3_CONNECTIONS", Default: "8", Usage: "parallel S3 requests"},
	{Name: "s3.part-size", Flag: "s3-part-size", Env: "COFFER_S3_PART_SIZE", Default: "16MiB", Usage: "S3 multipart part size (objects up to it are one PUT; memory per upload is about 3 parts)"},
	{Name: "s3.conditional-writes", Flag: "s3-conditional-writes", Env: "COFFER_S3_CONDITIONAL_WRITES", Default: "auto", Usage: "auto: probe the server for If-None-Match/If-Match; off: use the check-write-verify fallback"},
	{Name: "s3.lock-mode", Flag: "s3-lock-mode", Env: "COFFER_S3_LOCK_MODE", Default: "compliance", Usage: "Object Lock mode of immutable backups: compliance (nobody can shorten it) or governance"},
	{Name: "repository-server.credential-file", Flag: "repo-credential-file", Env: "COFFER_REPO_CREDENTIAL_FILE", Usage: "file holding this client's credential for a repository server (an https:// repository location)"},
	{Name: "repository-server.credential", Env: "COFFER_REPO_CREDENTIAL", Secret: true, Usage: "the credential for a repository server (prefer repository-server.credential-file)"},
	{Name: "repository-server.ca-file", Flag: "repo-ca-file", Env: "COFFER_REPO_CA_FILE", Usage: "PEM file of CAs trusted for a repository server's certificate"},
	{Name: "remote.url", Flag: "server", Env: "COFFER_SERVER", Usage: "act through this coffer server (https://host:8443) instead of opening the repository here"},
	{Name: "remote.token-file", Flag: "token-file", Env: "COFFER_TOKEN_FILE", Usage: "file holding the API token for --server"},
	{Name: "remote.token", Env: "COFFER_TOKEN", Secret: true, Usage: "API token for --server (prefer token-file)"},
	{Name: "remote.fingerprint", Flag: "server-fingerprint", Env: "COFFER_SERVER_FINGERPRINT", Usage: "trust the server's certificate by its SHA-256 fingerprint (coffer server prints it)"},
	{Name: "remote.ca-file", Flag: "server-ca-file", Env: "COFFER_SERVER_CA_FILE", Usage: "PEM file of CAs trusted for the server's certificate"},
	{Name: "remote.repository", Flag: "server-repository", Env: "COFFER_SERVER_REPOSITORY", Default: "default", Usage: "the server's repository that --server commands act on"},
}

// Sections are the structured top-level keys decoded by their owners, each
// into a typed schema with Decode, so an unknown key inside a section is an
// error like an unknown scalar key (the CLI decodes every one of them when
// it loads the file, whatever the command). connections, repositories,
// limits, resource-groups, policies, storage-snapshots, latency-control,
// media-libraries, replications and failover-plans belong to internal/policy; server to
// the server command; notifications to internal/notify; maintenance to
// internal/maintenance; realms (sign-in realms) to internal/auth.
var Sections = []string{"connections", "repositories", "policies", "server", "limits", "resource-groups", "storage-snapshots",
	"latency-control", "media-libraries", "replications", "failover-plans", "notifications", "maintenance", "realms"}

// File is a loaded configuration file.
type File struct {
	Path   string
	values map[string]string    // flattened scalar keys
	raw    map[string]yaml.Node // structured sections
}

// Load reads the configuration file. explicit is --config; when empty the
// standard locations are tried and a missing file is not an error.
func Load(explicit string) (*File, error) {
	f := &File{values: map[string]string{}, raw: map[string]yaml.Node{}}
	path := explicit
	if path == "" {
		path = os.Getenv("COFFER_CONFIG")
	}
	if path == "" {
		for _, p := range defaultPaths() {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		return f, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f.Path = path
	if err := f.parse(data); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return f, nil
}

func defaultPaths() []string {
	var out []string
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		out = append(out, filepath.Join(x, "coffer", "config.yaml"))
	} else if h, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(h, ".config", "coffer", "config.yaml"))
	}
	return append(out, "/etc/coffer/coffer.yaml")
}

// Parse reads a configuration document from memory (tests, the server).
func Parse(data []byte) (*File, error) {
	f := &File{values: map[string]string{}, raw: map[string]yaml.Node{}}
	return f, f.parse(data)
}

func (f *File) parse(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return errors.New("the top level must be a mapping of keys")
	}
	known := map[string]bool{}
	for _, k := range Keys {
		known[k.Name] = true
	}
	sections := map[string]bool{}
	for _, s := range Sections {
		sections[s] = true
	}
	return f.walk(root, "", known, sections)
}

func (f *File) walk(n *yaml.Node, prefix string, known, sections map[string]bool) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		name := prefix + k
		switch {
		case prefix == "" && sections[k]:
			f.raw[k] = *v
		case known[name]:
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: %s must be a single value", v.Line, name)
			}
			f.values[name] = v.Value
		case v.Kind == yaml.MappingNode && hasPrefix(known, name+"."):
			if err := f.walk(v, name+".", known, sections); err != nil {
				return err
			}
		default:
			return fmt.Errorf("line %d: unknown key %q%s", n.Content[i].Line, name, suggest(name, known, sections))
		}
	}
	return nil
}

func hasPrefix(known map[string]bool, p string) bool {
	for k := range known {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// suggest proposes the closest known key for a typo.
func suggest(name string, known, sections map[string]bool) string {
	best, bestD := "", 3
	for _, set := range []map[string]bool{known, sections} {
		for k := range set {
			if d := EditDistance(name, k); d < bestD {
				best, bestD = k, d
			}
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// EditDistance is the Levenshtein distance of a and b, by which a typo's
// closest known name is proposed.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Value returns a scalar from the file.
func (f *File) Value(name string) (string, bool) {
	v, ok := f.values[name]
	return v, ok
}

// Decode decodes a structured section into v; a missing section leaves v.
// Keys v has no field for are errors, like unknown scalar keys.
func (f *File) Decode(section string, v any) error {
	n, ok := f.raw[section]
	if !ok {
		return nil
	}
	if err := DecodeNode(&n, v, section); err != nil {
		return fmt.Errorf("config %s: section %s: %w", f.Path, section, err)
	}
	return nil
}

// Has reports whether a structured section is present.
func (f *File) Has(section string) bool {
	_, ok := f.raw[section]
	return ok
}

// Lookup returns a key's declaration.
func Lookup(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Names lists the declared scalar keys, sorted.
func Names() []string {
	out := make([]string, len(Keys))
	for i, k := range Keys {
		out[i] = k.Name
	}
	sort.Strings(out)
	return out
}

// ExpandHome replaces a leading ~ with the home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[1:])
		}
	}
	return p
}

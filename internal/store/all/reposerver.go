package all

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/remote"
)

// RepoServerConfig are the repository-server.* settings: how this
// process proves itself to a coffer repository server.
type RepoServerConfig struct {
	// CredentialFile holds the secret `coffer repository credential add`
	// printed; Credential is the secret itself (from the environment).
	CredentialFile, Credential string
	// CAFile is trusted for the server's certificate.
	CAFile string
}

// openRepoServer opens an https:// location: a coffer repository server.
// The location may name its own credential and CA files as query
// parameters (credential-file, ca-file), so that `coffer copy` can join
// two servers; they override the repository-server.* settings for that
// location only. Secrets never appear in a location.
func openRepoServer(ctx context.Context, cfg Config, location string, log *slog.Logger) (store.Store, error) {
	base, query, _ := strings.Cut(location, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, invalidf("%s: %v", location, err)
	}
	for k := range q {
		if k != "credential-file" && k != "ca-file" {
			return nil, invalidf("%s: unknown parameter %q (credential-file, ca-file)", location, k)
		}
	}
	c := cfg.RepoServer
	if v := q.Get("ca-file"); v != "" {
		c.CAFile = v
	}
	if v := q.Get("credential-file"); v != "" {
		c.CredentialFile, c.Credential = v, ""
	}
	if c.Credential == "" && c.CredentialFile != "" {
		raw, err := os.ReadFile(c.CredentialFile)
		if err != nil {
			return nil, invalidf("repository-server.credential-file: %v", err)
		}
		c.Credential = strings.TrimSpace(string(raw))
	}
	if c.Credential == "" {
		return nil, invalidf("%s is a repository server: give its credential with --repo-credential-file or COFFER_REPO_CREDENTIAL", base)
	}
	st, err := remote.Open(ctx, remote.Config{URL: base, Credential: c.Credential, CAFile: c.CAFile})
	if err != nil {
		return nil, err
	}
	log.Debug("repository server opened", "location", base, "right", st.Right())
	return withMetadataCache(cfg, st, base, log), nil
}

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// storeHook wraps every store a command opens. Crash tests replace it (in
// the test binary only) to kill the process at a chosen mutation.
var storeHook = func(st store.Store) store.Store { return st }

// openStore maps a repository location to its backend. This is the only
// place that knows every backend (an explicit registry).
func (a *app) openStore(ctx context.Context, location string) (store.Store, error) {
	st, err := a.openBackend(ctx, location)
	if err != nil {
		return nil, err
	}
	return storeHook(st), nil
}

func (a *app) openBackend(ctx context.Context, location string) (store.Store, error) {
	switch {
	case location == "":
		return nil, usagef("no repository given: use --repo, COFFER_REPO or `repository:` in the configuration file")
	case strings.HasPrefix(location, "s3://"):
		return a.openS3(ctx, location)
	case strings.Contains(location, "://"):
		return nil, usagef("unsupported repository location %q (a directory or s3://bucket/prefix)", location)
	}
	st, err := local.Open(location)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s does not exist (create one with `coffer init`)", repo.ErrNotRepository, location)
	}
	return st, err
}

// s3Opener opens s3:// locations; store_s3.go wires the S3 backend in.
var s3Opener func(ctx context.Context, a *app, location string) (store.Store, error) = openS3Store

func (a *app) openS3(ctx context.Context, location string) (store.Store, error) {
	if s3Opener == nil {
		return nil, usagef("this build of coffer has no S3 support")
	}
	return s3Opener(ctx, a, location)
}

// password resolves the repository password: password file, then the
// COFFER_PASSWORD variable, then a prompt on a terminal.
func (a *app) password(confirm bool) ([]byte, error) {
	return a.passwordFrom("password-file", "password", confirm)
}

func (a *app) passwordFrom(fileKey, valueKey string, confirm bool) ([]byte, error) {
	if path := a.res.Path(fileKey); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usagef("password file: %v", err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return nil, usagef("password file %s is empty", path)
		}
		return []byte(pw), nil
	}
	if pw := a.res.String(valueKey); pw != "" {
		return []byte(pw), nil
	}
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return a.prompt(f, confirm)
	}
	return nil, nil
}

func (a *app) prompt(f *os.File, confirm bool) ([]byte, error) {
	fmt.Fprint(a.stderr, "repository password: ")
	pw, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(a.stderr)
	if err != nil {
		return nil, err
	}
	if confirm {
		fmt.Fprint(a.stderr, "repeat password: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return nil, err
		}
		if string(again) != string(pw) {
			return nil, usagef("passwords do not match")
		}
	}
	return pw, nil
}

// readLine reads one line from stdin (for key add with piped input).
func (a *app) readLine() (string, error) {
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// openRepo opens the configured repository.
func (a *app) openRepo(ctx context.Context) (*repo.Repository, error) {
	pw, err := a.password(false)
	if err != nil {
		return nil, err
	}
	return a.openRepoAt(ctx, a.res.String("repository"), pw)
}

// openOtherRepo opens the second repository of copy / init --copy-keys-from.
func (a *app) openOtherRepo(ctx context.Context, location string) (*repo.Repository, error) {
	pw, err := a.passwordFrom("copy-target-password-file", "copy-target-password", false)
	if err != nil {
		return nil, err
	}
	return a.openRepoAt(ctx, location, pw)
}

func (a *app) openRepoAt(ctx context.Context, location string, pw []byte) (*repo.Repository, error) {
	st, err := a.openStore(ctx, location)
	if err != nil {
		return nil, err
	}
	r, err := repo.Open(ctx, st, pw, repo.Options{Logger: a.log})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return r, nil
}

// openPoint opens the repository for reading backup point ref: it takes a
// restore lease first (garbage collection keeps the point's data while it
// is read, even if the point is forgotten meanwhile), then finds the point.
// release ends the lease, also after the command's context was cancelled.
func (a *app) openPoint(ctx context.Context, ref, purpose string) (r *repo.Repository, s *repo.Snapshot, release func(), err error) {
	if r, err = a.openRepo(ctx); err != nil {
		return nil, nil, nil, err
	}
	lease, err := r.AcquireLease(ctx, "restore", "", purpose, false)
	if err != nil {
		return nil, nil, nil, err
	}
	release = func() { lease.Release(context.WithoutCancel(ctx)) }
	if s, err = r.FindSnapshot(ctx, ref); err != nil {
		release()
		return nil, nil, nil, err
	}
	return r, s, release, nil
}

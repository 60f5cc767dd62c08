package repoops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
	storeall "github.com/coffer-backup/coffer/internal/store/all"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// Init creates the default repository (the server binds the repository
// the request names), its master key protected by the repository's
// password unless the request stores data in the clear.
func (s Ops) Init(ctx context.Context, call *api.InitRepositoryInput) (*api.Repository, error) {
	var o InitOptions
	if !call.Body.NoEncryption {
		pw, err := service.Password(s.Config.Repository.Password)
		if err != nil {
			return nil, err
		}
		o.Password = pw
	}
	return s.InitWith(ctx, call, o)
}

// InitOptions are what only an init in this process says, apart from the
// request: the password the command line asked for (twice on a terminal)
// and a repository whose master key the new one reuses.
type InitOptions struct {
	// Password protects the master key (unless the request's
	// NoEncryption).
	Password []byte
	// CopyKeysFrom is a repository whose master key the new one reuses
	// (opened with the other password), so copies between them need no
	// re-encryption; a ChunkSizeBytes of 0 is then its chunk size, so
	// that copies deduplicate.
	CopyKeysFrom string
}

// InitWith creates the default repository with the password and key
// source of o.
func (s Ops) InitWith(ctx context.Context, call *api.InitRepositoryInput, o InitOptions) (*api.Repository, error) {
	in := call.Body
	location := s.Config.Repository.Location
	if location == "" {
		return nil, service.Invalidf("no repository given: use --repo, COFFER_REPO or `repository:` in the configuration file")
	}
	if !in.NoEncryption && len(o.Password) == 0 {
		return nil, service.Invalidf("a password is required: use --password-file, COFFER_PASSWORD_FILE or COFFER_PASSWORD (or --insecure-no-encryption)")
	}
	if !storeall.IsURL(location) {
		if _, err := local.Create(location); err != nil {
			return nil, err
		}
	}
	st, err := s.OpenStore(ctx, location)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ro := repo.InitOptions{Password: o.Password, NoEncryption: in.NoEncryption, ChunkSize: in.ChunkSizeBytes,
		PackSize: in.PackSizeBytes, CompressionLevel: in.CompressionLevel, KeyLabel: in.KeyLabel}
	if o.CopyKeysFrom != "" {
		other, release, err := s.Open(ctx, service.OtherRepoAt(o.CopyKeysFrom), service.NoLease)
		if err != nil {
			return nil, fmt.Errorf("--copy-keys-from: %w", err)
		}
		defer release()
		m := other.Key().Master()
		ro.Master = &m
		if ro.ChunkSize == 0 {
			ro.ChunkSize = other.Config().ChunkSize // same spans, so copies deduplicate
		}
	}
	cfg, err := repo.Init(ctx, st, ro)
	if err != nil {
		return nil, err
	}
	return repositoryDoc(cfg, st.Properties()), nil
}

func repositoryDoc(c repo.Config, p store.Properties) *api.Repository {
	return &api.Repository{ID: c.ID, Location: p.Location, FormatVersion: c.FormatVersion, Created: c.Created,
		Encryption: c.Encryption, ChunkSizeBytes: c.ChunkSize, PackSizeBytes: c.PackSize, Compression: c.Compression,
		CompressionLevel: c.CompressionLevel, ConditionalWrites: c.ConditionalWrites, ObjectLock: p.Retention}
}

// AddKey lets a second password open the default repository.
func (s Ops) AddKey(ctx context.Context, call *api.AddKeyInput) (*api.Key, error) {
	in := call.Body
	if in.Password == "" {
		return nil, service.Invalidf("the new password is empty")
	}
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*api.Key, error) {
		kf, err := r.AddKey(ctx, []byte(in.Password), in.Label)
		if err != nil {
			return nil, err
		}
		k := keyDoc(kf, r.CurrentKeyID())
		return &k, nil
	})
}

// Keys lists the default repository's keys.
func (s Ops) Keys(ctx context.Context, _ *api.RepoParam) ([]api.Key, error) {
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) ([]api.Key, error) {
		keys, err := r.Keys(ctx)
		if err != nil {
			return nil, err
		}
		out := []api.Key{}
		for _, k := range keys {
			out = append(out, keyDoc(k, r.CurrentKeyID()))
		}
		return out, nil
	})
}

func keyDoc(k *repo.KeyFile, current string) api.Key {
	return api.Key{ID: k.ID, Label: k.Label, User: k.User, Host: k.Host, Created: k.Created, Current: k.ID == current}
}

// RemoveKey revokes a key (by ID or unique prefix). The last key cannot be
// removed, nor the key this process opened the repository with (a
// server's own key: its schedules would be locked out), nor a key that
// opens points under object lock while they are locked.
func (s Ops) RemoveKey(ctx context.Context, call *api.RemoveKeyInput) (*api.KeyRemoval, error) {
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*api.KeyRemoval, error) {
		removed, err := r.RemoveKey(ctx, call.Key)
		if err != nil {
			return nil, err
		}
		return &api.KeyRemoval{Removed: removed}, nil
	})
}

// Leases lists who works on the default repository.
func (s Ops) Leases(ctx context.Context, _ *api.RepoParam) ([]api.Lease, error) {
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) ([]api.Lease, error) {
		leases, err := r.Leases(ctx)
		if err != nil {
			return nil, err
		}
		out := []api.Lease{}
		now := time.Now()
		for _, l := range leases {
			out = append(out, api.Lease{Kind: l.Kind, Host: l.Host, User: l.User, PID: l.PID, Description: l.Description,
				Since: l.Created, Expires: l.Expires, Alive: !l.Dead(now, service.Hostname())})
		}
		return out, nil
	})
}

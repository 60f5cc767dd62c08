// Package repo implements the coffer repository: a deduplicated, compressed,
// encrypted store of disk images on top of any store.Store backend. The
// on-disk format is specified in docs/design/repository-format.md; the
// format of each object type lives in a subpackage (pack, index, diskmap,
// chunk) and this package ties them together:
//
//   - config and keys (config.go, keys.go): open with a password;
//   - snapshots (snapshot.go): backup-point manifests;
//   - leases (lease.go): who is working on the repository, with expiry;
//   - the session writer (writer.go): packs new chunks, deduplicates
//     globally, and commits index segments before any manifest that needs them;
//   - crash recovery (recover.go): indexes packs of sessions that died;
//   - chunk loading (load.go);
//   - the way in for the layers above (access.go, integrity.go): disk maps,
//     pack reads, chunk encoders and decoders, index totals and the
//     classification of damage errors. Nothing outside internal/repo
//     imports the format subpackages (.golangci.yml enforces it).
//
// Ordering rules that make every mutation crash-safe: packs are committed
// before the index segment that lists them, index segments before the disk
// maps and manifest that reference their chunks, and a manifest is the last
// object of a backup. A manifest's existence therefore proves that every
// object it needs is durable.
package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/store"
)

// Repository is an open repository. Safe for concurrent use.
type Repository struct {
	st       store.Store
	cfg      Config
	key      *crypto.Key
	keyID    string
	idx      atomic.Pointer[index.Set]
	damage   atomic.Pointer[damageRecord]
	health   []HealthIssue
	unlocked *unlocked // how the key files opened (for repair)
	log      *slog.Logger
	hostname string
	opts     Options
	closed   atomic.Bool
	// history keeps the manifests HistoryPoints read (pointhistory.go).
	history pointHistory
}

// Options tune an open repository.
type Options struct {
	Logger *slog.Logger
	// IndexCacheBlocks bounds decoded index blocks kept in memory (60 KiB each).
	IndexCacheBlocks int
	// LeaseTTL is how long a lease lives without refresh (default 10 min).
	LeaseTTL time.Duration
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IndexCacheBlocks <= 0 {
		o.IndexCacheBlocks = 128
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 10 * time.Minute
	}
}

// InitOptions describe a new repository.
type InitOptions struct {
	Password         []byte
	NoEncryption     bool // --insecure-no-encryption
	ChunkSize        int
	PackSize         int
	CompressionLevel int // 0 = default; negative = no compression
	KDF              *crypto.KDF
	KeyLabel         string
	// Master reuses an existing repository's master key (init
	// --copy-keys-from): copies between the two then keep chunk IDs and
	// need no re-encryption.
	Master *crypto.MasterKey
}

// Init creates a repository in an empty store.
func Init(ctx context.Context, st store.Store, o InitOptions) (Config, error) {
	if _, err := st.Stat(ctx, configName); err == nil {
		return Config{}, fmt.Errorf("%w at %s", ErrAlreadyExists, st.Properties().Location)
	} else if !errors.Is(err, store.ErrNotFound) {
		return Config{}, fmt.Errorf("check for an existing repository: %w", err)
	}
	cfg := Config{
		Magic: configMagic, FormatVersion: FormatVersion, ID: id.Random().String()[:32], Created: time.Now().UTC(),
		Encryption: "aes-256-gcm", ChunkSize: o.ChunkSize, PackSize: o.PackSize,
		Compression: "zstd", CompressionLevel: o.CompressionLevel,
		ConditionalWrites: st.Properties().ConditionalWrites,
	}
	if o.NoEncryption {
		cfg.Encryption = "none"
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.PackSize == 0 {
		cfg.PackSize = DefaultPackSize
	}
	switch {
	case o.CompressionLevel == 0:
		cfg.CompressionLevel = DefaultCompressionLevel
	case o.CompressionLevel < 0:
		cfg.Compression, cfg.CompressionLevel = "none", 0
	case o.CompressionLevel > 19:
		return cfg, fmt.Errorf("compression level %d: zstd levels are 1-19", o.CompressionLevel)
	}
	if err := cfg.validate(); err != nil {
		return cfg, err
	}
	if !o.NoEncryption {
		if len(o.Password) == 0 {
			return cfg, errors.New("a password is required (or --insecure-no-encryption)")
		}
		m, err := crypto.NewMasterKey()
		if err != nil {
			return cfg, err
		}
		if o.Master != nil {
			m = *o.Master
		}
		kdf := crypto.DefaultKDF()
		if o.KDF != nil {
			kdf = *o.KDF
		}
		copyOf := cfg
		kf, err := newKeyFile(keyPayload{Master: m, Repository: cfg.ID, Encryption: cfg.Encryption, Config: &copyOf}, o.Password, o.KeyLabel, kdf)
		if err != nil {
			return cfg, err
		}
		if err := saveKeyFile(ctx, st, kf); err != nil {
			return cfg, fmt.Errorf("write key: %w", err)
		}
	}
	raw, err := cfg.encode()
	if err != nil {
		return cfg, err
	}
	// The config is written last: until it exists the directory is not a
	// repository, so an interrupted init can simply be repeated.
	if _, err := store.Put(ctx, st, configName, raw, store.PutOptions{IfNotExists: cfg.ConditionalWrites}); err != nil {
		if errors.Is(err, store.ErrExists) {
			return cfg, fmt.Errorf("%w at %s", ErrAlreadyExists, st.Properties().Location)
		}
		return cfg, fmt.Errorf("write config: %w", err)
	}
	return cfg, nil
}

// Open opens a repository with a password (ignored when unencrypted). A
// damaged or missing config, or a damaged copy of a key file, is worked
// around from the intact copies and reported by Health. Once Open
// succeeds the repository owns st: Close closes it. When Open fails, st
// stays the caller's to close.
func Open(ctx context.Context, st store.Store, password []byte, o Options) (*Repository, error) {
	o.defaults()
	cfg, cfgErr := loadConfig(ctx, st)
	// A config newer than this coffer may be a damaged one (a flipped
	// digit of its version): the authenticated copy in the key files
	// decides, when this coffer can unlock them (checkConfig).
	newer := errors.Is(cfgErr, ErrUnsupportedVersion)
	r := &Repository{st: st, log: o.Logger, opts: o}
	r.hostname, _ = os.Hostname()
	keys, err := readKeyObjects(ctx, st)
	switch {
	case err != nil && newer:
		return nil, cfgErr
	case err != nil:
		return nil, fmt.Errorf("read keys: %w", err)
	}
	switch {
	case cfgErr != nil && len(keys) == 0:
		// No key file carries a copy of the config: not a repository (or
		// an unencrypted one whose config is damaged).
		return nil, cfgErr
	case cfgErr == nil && cfg.Encryption == "none":
		// An unencrypted repository never has key files: keys next to a
		// config that claims "none" mean the config was edited to
		// downgrade an encrypted repository.
		if len(keys) > 0 {
			return nil, fmt.Errorf("the config says the repository is unencrypted but it has %d key(s): the config was tampered with; refusing to open", len(keys))
		}
		r.key = crypto.Null()
	case newer && cfg.Encryption == "none":
		return nil, cfgErr
	default:
		if len(password) == 0 {
			if newer {
				return nil, cfgErr
			}
			return nil, fmt.Errorf("repository is encrypted: a password is required: %w", crypto.ErrWrongPassword)
		}
		u, err := unlock(ctx, st, password)
		if err != nil {
			if newer && !errors.Is(err, crypto.ErrWrongPassword) {
				return nil, cfgErr // key files of a newer format
			}
			return nil, err
		}
		var health []HealthIssue
		if cfg, health, err = checkConfig(cfg, cfgErr, u); err != nil {
			return nil, err
		}
		r.key, r.keyID, r.unlocked = u.key, u.keyID, u
		r.health = append(health, u.health...)
		for _, h := range r.health {
			r.log.Warn("repository damage worked around; `"+h.Repair()+"` mends it", "object", h.Object, "problem", h.Detail)
		}
	}
	r.cfg = cfg
	if err := r.ReloadIndex(ctx); err != nil {
		return nil, err
	}
	if err := r.loadDamage(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Config returns the repository configuration.
func (r *Repository) Config() Config { return r.cfg }

// Store returns the backend.
func (r *Repository) Store() store.Store { return r.st }

// Close closes the repository: the store it was opened on, which it owns
// (connections, file handles). Leases and writers are not ended by it:
// their holders release them first, as a released lease must still be
// deleted from the store. Only the first call closes; later ones return
// nil, so a deferred Close may follow an explicit one.
func (r *Repository) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.st.Close()
}

// Key returns the repository key.
func (r *Repository) Key() *crypto.Key { return r.key }

// Index returns the chunk index.
func (r *Repository) Index() *index.Set { return r.idx.Load() }

// DamagedIndexSegments lists segments skipped as corrupt.
func (r *Repository) DamagedIndexSegments() []string { return r.Index().Damaged() }

// Logger returns the repository's logger.
func (r *Repository) Logger() *slog.Logger { return r.log }

// ReloadIndex reads the whole index again. Corrupt segments are skipped
// with a warning.
func (r *Repository) ReloadIndex(ctx context.Context) error {
	idx, err := index.Load(ctx, r.st, r.key, r.opts.IndexCacheBlocks, r.damagedSegment)
	if err != nil {
		return fmt.Errorf("load index: %w", err)
	}
	if d := r.damage.Load(); d != nil {
		idx.SetBad(d.bad)
	}
	r.idx.Store(idx)
	return nil
}

// RefreshIndex adds the segments other processes wrote since the index was
// loaded. Every session refreshes once its lease is visible (AcquireLease):
// garbage collection relies on it, since a session can only deduplicate
// against chunks that were indexed while its lease existed.
func (r *Repository) RefreshIndex(ctx context.Context) error {
	if err := r.Index().Refresh(ctx, r.damagedSegment); err != nil {
		return fmt.Errorf("load index: %w", err)
	}
	return nil
}

func (r *Repository) damagedSegment(name string, err error) {
	r.log.Warn("skipping a damaged index segment; `coffer repair index` rebuilds the index from the packs", "segment", name, "err", err)
}

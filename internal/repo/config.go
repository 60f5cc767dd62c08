package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
)

// Format versions. FormatVersion is what this build writes and the newest
// it reads; an older build refuses a newer repository with a clear message.
const (
	FormatVersion = 1
	configMagic   = "coffer-repository"
	configName    = "config"
)

// Defaults chosen by the repository benchmark (docs/benchmarks.md).
const (
	DefaultChunkSize        = 256 << 10
	DefaultPackSize         = 16 << 20
	DefaultCompressionLevel = 1
	MinChunkSize            = 64 << 10
	MaxChunkSize            = 16 << 20
)

// Config is the plaintext description of a repository (object "config").
// It holds nothing secret: what must not be tampered with (the encryption
// scheme, the repository ID) is repeated inside every key file's sealed
// payload and checked at open.
type Config struct {
	Magic            string    `json:"magic"`
	FormatVersion    int       `json:"format_version"`
	ID               string    `json:"id"`
	Created          time.Time `json:"created"`
	Encryption       string    `json:"encryption"` // "aes-256-gcm" or "none"
	ChunkSize        int       `json:"chunk_size"`
	PackSize         int       `json:"pack_size"`
	Compression      string    `json:"compression"` // "zstd" or "none"
	CompressionLevel int       `json:"compression_level"`
	// ConditionalWrites records whether the store enforced conditional
	// writes when the repository was created (see store.Properties).
	ConditionalWrites bool `json:"conditional_writes"`
}

// Errors for repositories that cannot be opened at all.
var (
	ErrNotRepository      = errors.New("not a coffer repository")
	ErrUnsupportedVersion = errors.New("repository format is newer than this coffer")
	ErrAlreadyExists      = errors.New("a repository already exists here")
)

func (c *Config) validate() error {
	if c.Magic != configMagic {
		return fmt.Errorf("%w: config has magic %q", ErrNotRepository, c.Magic)
	}
	if c.FormatVersion < 1 {
		return fmt.Errorf("repository config: format version %d is no version coffer ever wrote", c.FormatVersion)
	}
	if c.FormatVersion > FormatVersion {
		return fmt.Errorf("%w: format version %d, this build supports up to %d: upgrade coffer", ErrUnsupportedVersion, c.FormatVersion, FormatVersion)
	}
	if c.ChunkSize < MinChunkSize || c.ChunkSize > MaxChunkSize || c.ChunkSize&(c.ChunkSize-1) != 0 {
		return fmt.Errorf("repository config: chunk size %d is not a power of two in [%d, %d]", c.ChunkSize, MinChunkSize, MaxChunkSize)
	}
	if c.PackSize < c.ChunkSize || c.PackSize > 1<<30 {
		return fmt.Errorf("repository config: pack size %d out of range", c.PackSize)
	}
	if c.Encryption != "aes-256-gcm" && c.Encryption != "none" {
		return fmt.Errorf("repository config: unknown encryption %q", c.Encryption)
	}
	if c.Compression != "zstd" && c.Compression != "none" {
		return fmt.Errorf("repository config: unknown compression %q", c.Compression)
	}
	return nil
}

// ReadConfig reads the plaintext config of the repository in st without
// opening it (no password, no key): its ID and format, for a health check
// that must stay cheap. It fails with ErrNotRepository when st holds none.
func ReadConfig(ctx context.Context, st store.Store) (Config, error) { return loadConfig(ctx, st) }

func loadConfig(ctx context.Context, st store.Store) (Config, error) {
	var c Config
	raw, err := store.Get(ctx, st, configName, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return c, fmt.Errorf("%w at %s (create one with `coffer init`)", ErrNotRepository, st.Properties().Location)
	}
	if err != nil {
		return c, fmt.Errorf("read repository config: %w", err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("%w at %s: config is not valid JSON: %v", ErrNotRepository, st.Properties().Location, err)
	}
	return c, c.validate()
}

// encode is the config object's bytes: indented JSON, for people who look.
func (c Config) encode() ([]byte, error) { return json.MarshalIndent(c, "", "  ") }

// Level returns the zstd level for new chunks (0 = no compression).
func (c Config) Level() int {
	if c.Compression == "none" {
		return 0
	}
	return c.CompressionLevel
}

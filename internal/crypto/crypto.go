// Package crypto seals every object coffer writes and computes chunk IDs.
//
// A repository has one master key made of two independent 256-bit secrets:
// an AES-256-GCM key that encrypts and authenticates every blob, and a
// BLAKE3 key for chunk IDs. IDs are keyed hashes so identical chunks still
// deduplicate while stored names and indexes reveal nothing about content
// to someone without the key. The master key is stored wrapped by
// password-derived keys (argon2id), several per repository (keys.go).
//
// Repositories created with --insecure-no-encryption use a Null key: blobs
// are stored in the clear with a BLAKE3 checksum, and IDs are plain BLAKE3.
package crypto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"

	"github.com/coffer-backup/coffer/internal/id"
)

// ErrAuth means a blob failed authentication: it was corrupted, truncated,
// tampered with, or sealed with another key.
var ErrAuth = errors.New("authentication failed: data corrupted or wrong key")

const (
	nonceSize = 12
	tagSize   = 16
	sumSize   = 16 // checksum of unencrypted blobs
)

// Key seals and opens blobs and computes chunk IDs. Safe for concurrent use.
type Key struct {
	aead   cipher.AEAD // nil for a Null key
	idKey  []byte      // nil for a Null key (plain BLAKE3)
	secret MasterKey
}

// MasterKey is the serialisable secret of a repository.
type MasterKey struct {
	Encryption [32]byte `json:"encryption"`
	ChunkID    [32]byte `json:"chunk_id"`
}

// NewMasterKey returns fresh random secrets.
func NewMasterKey() (MasterKey, error) {
	var m MasterKey
	if _, err := rand.Read(m.Encryption[:]); err != nil {
		return m, err
	}
	if _, err := rand.Read(m.ChunkID[:]); err != nil {
		return m, err
	}
	return m, nil
}

// NewKey builds an encrypting key from a master key.
func NewKey(m MasterKey) (*Key, error) {
	block, err := aes.NewCipher(m.Encryption[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead, idKey: append([]byte(nil), m.ChunkID[:]...), secret: m}, nil
}

// Null returns the key of an unencrypted repository.
func Null() *Key { return &Key{} }

// Encrypted reports whether blobs are encrypted.
func (k *Key) Encrypted() bool { return k.aead != nil }

// Master returns the secret for wrapping into a key file.
func (k *Key) Master() MasterKey { return k.secret }

// Overhead is the number of bytes Seal adds.
func (k *Key) Overhead() int {
	if k.aead == nil {
		return sumSize
	}
	return nonceSize + tagSize
}

// Seal appends the sealed form of plaintext to dst. The context string
// (e.g. "chunk", "index-block") is authenticated, so a blob of one kind
// cannot be passed off as another.
func (k *Key) Seal(dst, plaintext []byte, context string) []byte {
	if k.aead == nil {
		dst = append(dst, plaintext...)
		sum := checksum(context, plaintext)
		return append(dst, sum[:]...)
	}
	start := len(dst)
	dst = append(dst, make([]byte, nonceSize)...)
	if _, err := rand.Read(dst[start : start+nonceSize]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS RNG never fails on Linux >= 3.17
	}
	return k.aead.Seal(dst, dst[start:start+nonceSize], plaintext, []byte(context))
}

// Open verifies sealed and appends its plaintext to dst.
func (k *Key) Open(dst, sealed []byte, context string) ([]byte, error) {
	if k.aead == nil {
		if len(sealed) < sumSize {
			return nil, fmt.Errorf("%s blob of %d bytes: %w", context, len(sealed), ErrAuth)
		}
		body := sealed[:len(sealed)-sumSize]
		sum := checksum(context, body)
		if string(sum[:]) != string(sealed[len(body):]) {
			return nil, fmt.Errorf("%s blob: checksum mismatch: %w", context, ErrAuth)
		}
		return append(dst, body...), nil
	}
	if len(sealed) < nonceSize+tagSize {
		return nil, fmt.Errorf("%s blob of %d bytes: %w", context, len(sealed), ErrAuth)
	}
	out, err := k.aead.Open(dst, sealed[:nonceSize], sealed[nonceSize:], []byte(context))
	if err != nil {
		return nil, fmt.Errorf("%s blob: %w", context, ErrAuth)
	}
	return out, nil
}

func checksum(context string, data []byte) [sumSize]byte {
	h := blake3.New()
	_, _ = h.WriteString(context)
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(data)
	var full [32]byte
	h.Sum(full[:0]) // Sum appends the full 32-byte digest
	var out [sumSize]byte
	copy(out[:], full[:])
	return out
}

// Hasher computes chunk IDs. Not safe for concurrent use: each worker owns
// one (NewHasher), which avoids re-keying BLAKE3 for every chunk.
type Hasher struct {
	h *blake3.Hasher
}

// NewHasher returns a chunk-ID hasher for this key.
func (k *Key) NewHasher() *Hasher {
	if k.idKey == nil {
		return &Hasher{h: blake3.New()}
	}
	h, err := blake3.NewKeyed(k.idKey)
	if err != nil {
		panic(err) // only fails for a key that is not 32 bytes
	}
	return &Hasher{h: h}
}

// Sum returns the chunk ID of data.
func (h *Hasher) Sum(data []byte) id.ID {
	h.h.Reset()
	_, _ = h.h.Write(data)
	var out id.ID
	h.h.Sum(out[:0])
	return out
}

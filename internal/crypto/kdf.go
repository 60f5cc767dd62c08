package crypto

import (
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/crypto/argon2"
)

// ErrWrongPassword means a key file could not be unwrapped with the password.
var ErrWrongPassword = errors.New("wrong password or no key for it")

// KDF describes how a password becomes a key-encryption key. Parameters are
// stored with each key file so they can be raised later without breaking
// existing keys.
type KDF struct {
	Algorithm string `json:"algorithm"` // "argon2id"
	Time      uint32 `json:"time"`
	MemoryKiB uint32 `json:"memory_kib"`
	Threads   uint8  `json:"threads"`
	Salt      []byte `json:"salt"`
}

// DefaultKDF returns argon2id with t=3, 32 MiB, 2 lanes and a fresh salt:
// about 60 ms on the reference 2-core machine. RFC 9106 suggests 64 MiB;
// coffer halves the memory so that the KDF never dominates the peak RSS of a
// backup (target < 128 MiB) and compensates with the time cost.
func DefaultKDF() KDF {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic(err)
	}
	return KDF{Algorithm: "argon2id", Time: 3, MemoryKiB: 32 << 10, Threads: 2, Salt: salt}
}

// Derive turns a password into a 256-bit key-encryption key.
func (k KDF) Derive(password []byte) ([32]byte, error) {
	var out [32]byte
	if k.Algorithm != "argon2id" {
		return out, fmt.Errorf("unsupported key derivation %q", k.Algorithm)
	}
	// Bounds keep a tampered key file from making us allocate gigabytes.
	if k.Time < 1 || k.Time > 100 || k.MemoryKiB < 8<<10 || k.MemoryKiB > 4<<20 || k.Threads < 1 || len(k.Salt) < 8 {
		return out, fmt.Errorf("implausible argon2id parameters t=%d m=%dKiB p=%d", k.Time, k.MemoryKiB, k.Threads)
	}
	copy(out[:], argon2.IDKey(password, k.Salt, k.Time, k.MemoryKiB, k.Threads, 32))
	// argon2's memory (32 MiB by default) is garbage now, but it set the
	// garbage collector's next goal: without a collection here a backup
	// let its heap grow to twice that before collecting, about 30 MiB of
	// peak RSS for nothing. One collection of a small heap costs ~1 ms.
	runtime.GC()
	return out, nil
}

// Wrap seals secret with a key derived from password.
func Wrap(secret, password []byte, kdf KDF) ([]byte, error) {
	kek, err := kdf.Derive(password)
	if err != nil {
		return nil, err
	}
	k, err := NewKey(MasterKey{Encryption: kek})
	if err != nil {
		return nil, err
	}
	return k.Seal(nil, secret, "key-file"), nil
}

// Unwrap opens a secret sealed by Wrap; a wrong password gives ErrWrongPassword.
func Unwrap(sealed, password []byte, kdf KDF) ([]byte, error) {
	kek, err := kdf.Derive(password)
	if err != nil {
		return nil, err
	}
	k, err := NewKey(MasterKey{Encryption: kek})
	if err != nil {
		return nil, err
	}
	out, err := k.Open(nil, sealed, "key-file")
	if err != nil {
		return nil, ErrWrongPassword
	}
	return out, nil
}

package crypto

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

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
	id := k.memoKey(password)
	derived.Lock()
	kek, ok := derived.keys[id]
	derived.Unlock()
	if ok {
		return kek, nil
	}
	derivations.Add(1)
	copy(out[:], argon2.IDKey(password, k.Salt, k.Time, k.MemoryKiB, k.Threads, 32))
	derived.Lock()
	if len(derived.keys) >= maxDerived {
		clear(derived.keys)
	}
	derived.keys[id] = out
	derived.Unlock()
	// argon2's memory (32 MiB by default) is garbage now, but it set the
	// garbage collector's next goal: without a collection here a backup
	// let its heap grow to twice that before collecting, about 30 MiB of
	// peak RSS for nothing. One collection of a small heap costs ~1 ms.
	runtime.GC()
	return out, nil
}

// derived remembers the keys Derive computed in this process, so that a
// long-running process that opens a repository for each request (the
// server: every listing of points, every restore) pays the KDF, tens of
// milliseconds and 32 MiB, once per password and key file rather than
// every time. It holds nothing that whoever reads the process's memory
// lacks, since the process holds the password; its keys are MACs under
// a secret of the process, so that they cannot be used to test guesses
// of the password elsewhere.
var derived = struct {
	sync.Mutex
	secret [32]byte
	keys   map[[32]byte][32]byte
}{keys: map[[32]byte][32]byte{}}

// maxDerived bounds the memory: a process uses a handful of passwords.
const maxDerived = 64

// derivations counts the KDF computations (tests).
var derivations atomic.Int64

func init() {
	if _, err := rand.Read(derived.secret[:]); err != nil {
		panic(err)
	}
}

// memoKey identifies a derivation: the parameters, salt and password.
func (k KDF) memoKey(password []byte) [32]byte {
	m := hmac.New(sha256.New, derived.secret[:])
	var n [4]byte
	for _, f := range [][]byte{[]byte(k.Algorithm), binary.BigEndian.AppendUint32(nil, k.Time),
		binary.BigEndian.AppendUint32(nil, k.MemoryKiB), {k.Threads}, k.Salt, password} {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		m.Write(n[:])
		m.Write(f)
	}
	var id [32]byte
	copy(id[:], m.Sum(nil))
	return id
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

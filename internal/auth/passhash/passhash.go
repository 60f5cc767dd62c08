// Package passhash hashes and checks passwords with argon2id, in the PHC
// string format that other implementations read and write. It is auth's,
// apart so that the hashing stays small and alone: which passwords and
// parameters are acceptable is auth's business.
package passhash

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's costs for password hashes.
type Params struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
}

// Default are OWASP's minimum for argon2id (m=19 MiB, t=2,
// p=1; Password Storage Cheat Sheet). Stronger settings are accepted;
// weaker ones are refused, and hashes made with weaker ones (by an older
// coffer) are replaced at the next successful sign-in.
var Default = Params{MemoryKiB: 19 * 1024, Time: 2, Threads: 1}

// WeakerThan reports whether a hash made with p should be made again with q.
func (p Params) WeakerThan(q Params) bool {
	return p.MemoryKiB < q.MemoryKiB || p.Time < q.Time || p.Threads < q.Threads
}

const (
	saltBytes = 16
	keyBytes  = 32
	// The limits of a stored hash's parameters, so that a damaged or
	// hostile catalog row cannot make a sign-in allocate gigabytes.
	maxMemoryKiB = 1 << 20 // 1 GiB
	maxTime      = 64
)

var b64 = base64.RawStdEncoding

// Hash returns the PHC string of password:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<key> (unpadded standard base64).
func Hash(password string, p Params) string {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, keyBytes)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Time, p.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// Parse reads a hash written by Hash (or another argon2id
// implementation writing the PHC format).
func Parse(s string) (p Params, salt, key []byte, err error) {
	bad := func(what string) error { return fmt.Errorf("stored password hash is not argon2id PHC: %s", what) }
	f := strings.Split(s, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" {
		return p, nil, nil, bad("expected $argon2id$v=19$m=,t=,p=$salt$hash")
	}
	if f[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, bad("version " + f[2])
	}
	for _, kv := range strings.Split(f[3], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return p, nil, nil, bad("parameter " + kv)
		}
		switch k {
		case "m":
			p.MemoryKiB = uint32(n)
		case "t":
			p.Time = uint32(n)
		case "p":
			if n > 255 {
				return p, nil, nil, bad("parameter " + kv)
			}
			p.Threads = uint8(n)
		default:
			return p, nil, nil, bad("parameter " + kv)
		}
	}
	if p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > maxMemoryKiB || p.Time < 1 || p.Time > maxTime || p.Threads < 1 {
		return p, nil, nil, bad(fmt.Sprintf("parameters m=%d,t=%d,p=%d out of range", p.MemoryKiB, p.Time, p.Threads))
	}
	if salt, err = b64.DecodeString(f[4]); err != nil || len(salt) < 8 {
		return p, nil, nil, bad("salt")
	}
	if key, err = b64.DecodeString(f[5]); err != nil || len(key) < 16 {
		return p, nil, nil, bad("hash")
	}
	return p, salt, key, nil
}

// verifications counts argon2id password checks: the tests show with it
// that every failed sign-in costs the same work, whatever its cause.
var verifications atomic.Int64

// Verifications is how many hashes Verify has computed in this process.
func Verifications() int64 { return verifications.Load() }

// Verify reports whether password matches the PHC hash, and the
// hash's parameters. The comparison takes the same time wherever the
// first difference is.
func Verify(phc, password string) (bool, Params, error) {
	p, salt, key, err := Parse(phc)
	if err != nil {
		return false, p, err
	}
	verifications.Add(1)
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1, p, nil
}

package auth

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/coffer-backup/coffer/internal/auth/passhash"
)

// HashParams are argon2id's costs for password hashes (passhash.Params).
type HashParams = passhash.Params

// DefaultHashParams are the weakest accepted (passhash.Default); hashes
// made with weaker ones are replaced at the next successful sign-in.
var DefaultHashParams = passhash.Default

func checkHashParams(p HashParams) error {
	if p.WeakerThan(DefaultHashParams) || p.Threads < 1 {
		return fmt.Errorf("%w: argon2id m=%dKiB t=%d p=%d is weaker than the minimum m=%dKiB t=%d p=1",
			ErrInvalid, p.MemoryKiB, p.Time, p.Threads, DefaultHashParams.MemoryKiB, DefaultHashParams.Time)
	}
	return nil
}

// Password rules: long enough to resist guessing (NIST SP 800-63B asks
// for at least 8, 15 without a second factor; coffer asks for 12 and
// accepts any characters, spaces included, so pass phrases work), bounded
// so that hashing stays cheap.
const (
	MinPasswordLen = 12   // characters
	MaxPasswordLen = 1024 // bytes
)

// checkNewPassword says what is wrong with a new password, never the
// password itself.
func checkNewPassword(password, user string) error {
	switch {
	case !utf8.ValidString(password):
		return errorf(ErrInvalid, "the password is not valid UTF-8")
	case utf8.RuneCountInString(password) < MinPasswordLen:
		return errorf(ErrInvalid, "the password is too short: use at least %d characters (a pass phrase of a few words is easiest)", MinPasswordLen)
	case len(password) > MaxPasswordLen:
		return errorf(ErrInvalid, "the password is too long: use at most %d bytes", MaxPasswordLen)
	case strings.EqualFold(password, user):
		return errorf(ErrInvalid, "the password must not be the user name")
	}
	return nil
}

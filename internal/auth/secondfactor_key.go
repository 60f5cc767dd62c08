package auth

import "github.com/coffer-backup/coffer/internal/auth/factorkey"

// The server's second-factor key (package factorkey) seals TOTP seeds in
// the catalog: a copy of the catalog holds no seed anyone can compute
// codes from.

// SecondFactorKeyBytes is the size of the key (AES-256).
const SecondFactorKeyBytes = factorkey.Bytes

// errNoKey refuses TOTP where the access control was given no key.
var errNoKey = errorf(ErrInvalid, "TOTP needs the server's second-factor key: enrol through the server, "+
	"or run this command on the server's host with its state directory")

// seal encrypts a seed for user with the server's key.
func (s *Service) seal(user string, plain []byte) (string, error) {
	if len(s.o.SecondFactorKey) == 0 {
		return "", errNoKey
	}
	return factorkey.Seal(s.o.SecondFactorKey, user, plain)
}

// open decrypts what seal made for user.
func (s *Service) open(user, sealed string) ([]byte, error) {
	if len(s.o.SecondFactorKey) == 0 {
		return nil, errNoKey
	}
	return factorkey.Open(s.o.SecondFactorKey, user, sealed)
}

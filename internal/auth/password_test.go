package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestHashParamsBelowOWASPAreRefused(t *testing.T) {
	for _, p := range []HashParams{{MemoryKiB: 19455, Time: 2, Threads: 1}, {MemoryKiB: 19456, Time: 1, Threads: 1}, {MemoryKiB: 19456, Time: 2}} {
		if _, err := New(nil, Options{Hash: p}); !errors.Is(err, ErrInvalid) {
			t.Errorf("New with %+v: %v", p, err)
		}
	}
	if !(HashParams{MemoryKiB: 19456, Time: 2, Threads: 1}).WeakerThan(HashParams{MemoryKiB: 65536, Time: 2, Threads: 1}) ||
		(HashParams{MemoryKiB: 65536, Time: 3, Threads: 1}).WeakerThan(DefaultHashParams) {
		t.Error("weakerThan")
	}
}

func TestNewPasswordRules(t *testing.T) {
	for pw, ok := range map[string]bool{
		"pw-4":                                false,
		"elevenchars":                         false,
		"twelve chars":                        true,
		"ünïcödé ünïc":                        true, // 12 characters, more bytes
		"alice.smith1":                        false,
		"ALICE.SMITH1":                        false, // the user name, in another case
		strings.Repeat("x", MaxPasswordLen):   true,
		strings.Repeat("x", MaxPasswordLen+1): false,
		"invalid utf8 \xff\xfe":               false,
	} {
		err := checkNewPassword(pw, "alice.smith1")
		if (err == nil) != ok {
			t.Errorf("checkNewPassword(%q) = %v", pw, err)
		}
		if err != nil && strings.Contains(err.Error(), pw) {
			t.Errorf("the error repeats the password: %v", err)
		}
	}
}

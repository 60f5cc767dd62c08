package auth

import (
	"encoding/hex"
	"strings"
	"testing"
)

// The parsers of what arrives from the network: each accepts exactly one
// spelling of a value (formatting what it parsed gives the input back),
// and its errors never repeat the input (it may be a secret).

func FuzzParseAPIToken(f *testing.F) {
	f.Add("coffer_0123456789abcdef_" + strings.Repeat("5a", 32))
	f.Add("coffer_0123456789abcdef_" + strings.Repeat("5A", 32))
	f.Add("coffer__")
	f.Add("coffer_0123456789abcdef__" + strings.Repeat("5a", 32))
	f.Add("Bearer coffer_x_y")
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, err := ParseAPIToken(s)
		if err != nil {
			checkErrorHidesInput(t, err, s)
			return
		}
		if got := FormatAPIToken(id, secret); got != s {
			t.Fatalf("ParseAPIToken(%q) then FormatAPIToken = %q", s, got)
		}
		if len(id) != 2*tokenIDBytes || len(secret) != secretBytes {
			t.Fatalf("ParseAPIToken(%q): ID %q, %d secret bytes", s, id, len(secret))
		}
	})
}

func FuzzParseSessionCookie(f *testing.F) {
	f.Add(strings.Repeat("0f", 32))
	f.Add(strings.Repeat("0F", 32))
	f.Add("")
	f.Add(strings.Repeat("0f", 31) + "0")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseSessionCookie(s)
		if err != nil {
			checkErrorHidesInput(t, err, s)
			return
		}
		if got := hex.EncodeToString(id); got != s || len(id) != secretBytes {
			t.Fatalf("ParseSessionCookie(%q) = %q", s, got)
		}
	})
}

func FuzzParseBearer(f *testing.F) {
	f.Add("Bearer coffer_0123456789abcdef_" + strings.Repeat("5a", 32))
	f.Add("bearer x")
	f.Add("Basic dXNlcjpwYXNz")
	f.Add("Bearer  x")
	f.Fuzz(func(t *testing.T, h string) {
		cred, err := ParseBearer(h)
		if err != nil {
			checkErrorHidesInput(t, err, h)
			return
		}
		if cred == "" || strings.ContainsAny(cred, " \t") || !strings.EqualFold(h[:7], "Bearer ") || h[7:] != cred {
			t.Fatalf("ParseBearer(%q) = %q", h, cred)
		}
	})
}

func FuzzParseSetupToken(f *testing.F) {
	f.Add("coffersetup_" + strings.Repeat("a1", 32))
	f.Add("coffersetup_")
	f.Fuzz(func(t *testing.T, s string) {
		secret, err := ParseSetupToken(s)
		if err != nil {
			checkErrorHidesInput(t, err, s)
			return
		}
		if got := FormatSetupToken(secret); got != s {
			t.Fatalf("ParseSetupToken(%q) then FormatSetupToken = %q", s, got)
		}
	})
}

// checkErrorHidesInput fails when err's message repeats a part of the
// input long enough to be a secret's.
func checkErrorHidesInput(t *testing.T, err error, in string) {
	t.Helper()
	const enough = 12
	msg := err.Error()
	for i := 0; i+enough <= len(in); i++ {
		if part := in[i : i+enough]; strings.Contains(msg, part) {
			// The message's own fixed text may hold such a part by
			// chance (the fuzzer may type "coffer_<16 hex"): only a
			// part the fixed text lacks is a leak.
			if !strings.Contains(fixedMessages, part) {
				t.Fatalf("error %q repeats %q of the input", msg, part)
			}
		}
	}
}

// fixedMessages are the parse errors' texts.
var fixedMessages = strings.Join([]string{
	"malformed API token: expected coffer_<16 hex digits>_<64 hex digits>",
	"malformed session cookie: sign in again",
	"malformed Authorization header: expected \"Bearer coffer_...\"",
	"malformed setup token: expected coffersetup_<64 hex digits>, as printed by coffer server init",
}, "\n")

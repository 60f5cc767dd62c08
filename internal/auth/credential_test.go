package auth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestAPITokenFormat(t *testing.T) {
	secret := bytes.Repeat([]byte{0xab}, secretBytes)
	tok := FormatAPIToken("0123456789abcdef", secret)
	if tok != "coffer_0123456789abcdef_"+strings.Repeat("ab", secretBytes) {
		t.Fatalf("token %q", tok)
	}
	id, got, err := ParseAPIToken(tok)
	if err != nil || id != "0123456789abcdef" || !bytes.Equal(got, secret) {
		t.Fatalf("ParseAPIToken = %q, %x, %v", id, got, err)
	}
	for _, bad := range []string{"", "coffer_", "coffer__", tok + "0", tok[:len(tok)-1], strings.ToUpper(tok),
		"Coffer" + tok[6:], strings.Replace(tok, "_", "-", 1), "coffer_0123456789ABCDEF_" + strings.Repeat("ab", 32),
		"coffer_0123456789abcdef_" + strings.Repeat("ab", 31) + "_a", "coffer_0123456789abcdeg_" + strings.Repeat("ab", 32)} {
		if _, _, err := ParseAPIToken(bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("ParseAPIToken(%q) = %v", bad, err)
		}
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "BEARER x_y": "x_y"} {
		if got, err := ParseBearer(h); err != nil || got != want {
			t.Errorf("ParseBearer(%q) = %q, %v", h, got, err)
		}
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic abc", "Bearer a b", "Bearer\tabc", "Bearer  abc"} {
		if _, err := ParseBearer(h); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("ParseBearer(%q) accepted", h)
		}
	}
}

func TestSessionAndSetupFormats(t *testing.T) {
	id := strings.Repeat("0f", secretBytes)
	if b, err := ParseSessionCookie(id); err != nil || hex.EncodeToString(b) != id {
		t.Fatalf("ParseSessionCookie: %x, %v", b, err)
	}
	for _, bad := range []string{"", id[1:], id + "0", strings.ToUpper(id), id[:62] + "zz"} {
		if _, err := ParseSessionCookie(bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("ParseSessionCookie(%q) accepted", bad)
		}
	}
	tok := FormatSetupToken(bytes.Repeat([]byte{1}, secretBytes))
	if b, err := ParseSetupToken(tok); err != nil || FormatSetupToken(b) != tok {
		t.Fatalf("ParseSetupToken(%q): %v", tok, err)
	}
	if _, err := ParseSetupToken("coffer_" + tok[12:]); !errors.Is(err, ErrInvalid) {
		t.Errorf("a setup token with the API token prefix: %v", err)
	}
}

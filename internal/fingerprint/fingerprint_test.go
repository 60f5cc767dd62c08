package fingerprint

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
)

// TestParseReadsWhatFormatWrites: a fingerprint as coffer server prints
// it, or as a user may paste it (lower case, no colons, a sha256:
// prefix), reads back as the certificate's SHA-256; anything else is
// refused.
func TestParseReadsWhatFormatWrites(t *testing.T) {
	der := []byte("not a real certificate, but bytes to hash")
	sum := sha256.Sum256(der)
	printed := Format(der)
	if len(printed) != 95 || strings.ToUpper(printed) != printed || strings.Count(printed, ":") != 31 {
		t.Fatalf("Format wrote %q, not 32 upper-case hex pairs joined by colons", printed)
	}
	for _, s := range []string{printed, strings.ToLower(printed), strings.ReplaceAll(printed, ":", ""), "sha256:" + printed, " SHA256:" + printed + "\n"} {
		got, err := Parse(s)
		if err != nil || !bytes.Equal(got, sum[:]) {
			t.Errorf("Parse(%q) = %x, %v; want %x", s, got, err, sum)
		}
	}
	for _, s := range []string{"", printed[:94], printed + ":00", "zz" + printed[2:]} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted it", s)
		}
	}
}

package crypto

import (
	"testing"

	"golang.org/x/crypto/argon2"
)

// TestDeriveRemembersKeys: deriving the same password with the same
// parameters and salt again gives the same key without computing it
// again; another password, salt or cost is computed, and every key is
// argon2id's.
func TestDeriveRemembersKeys(t *testing.T) {
	k := DefaultKDF()
	k.MemoryKiB, k.Time = 8<<10, 1 // the smallest cost allowed: quick
	derive := func(k KDF, pw string) ([32]byte, int64) {
		t.Helper()
		before := derivations.Load()
		key, err := k.Derive([]byte(pw))
		if err != nil {
			t.Fatal(err)
		}
		var want [32]byte
		copy(want[:], argon2.IDKey([]byte(pw), k.Salt, k.Time, k.MemoryKiB, k.Threads, 32))
		if key != want {
			t.Fatalf("Derive(%q) is not argon2id's key", pw)
		}
		return key, derivations.Load() - before
	}
	first, n := derive(k, "correct horse")
	if n != 1 {
		t.Fatalf("the first derivation computed %d keys", n)
	}
	again, n := derive(k, "correct horse")
	if n != 0 || again != first {
		t.Errorf("the same derivation again computed %d keys", n)
	}
	other := k
	other.Salt = append([]byte{1}, k.Salt[1:]...)
	if other.Salt[0] == k.Salt[0] {
		other.Salt[0] = 2
	}
	costlier := k
	costlier.Time = 2
	for name, c := range map[string]struct {
		k  KDF
		pw string
	}{"another password": {k, "battery staple"}, "another salt": {other, "correct horse"}, "another cost": {costlier, "correct horse"}} {
		if key, n := derive(c.k, c.pw); n != 1 || key == first {
			t.Errorf("%s: %d keys computed, same key: %v", name, n, key == first)
		}
	}
}

package passhash

import (
	"regexp"
	"strings"
	"testing"
)

func TestPasswordHashPHC(t *testing.T) {
	h := Hash("a long pass phrase", Default)
	if !regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`).MatchString(h) {
		t.Fatalf("hash %q is not the PHC string of argon2id m=19456,t=2,p=1", h)
	}
	if h2 := Hash("a long pass phrase", Default); h2 == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	ok, p, err := Verify(h, "a long pass phrase")
	if err != nil || !ok || p != Default {
		t.Fatalf("verify the right password: %v, %+v, %v", ok, p, err)
	}
	for _, wrong := range []string{"a long pass phrasE", "", "a long pass phrase "} {
		if ok, _, err := Verify(h, wrong); err != nil || ok {
			t.Fatalf("verify %q: %v, %v", wrong, ok, err)
		}
	}
	// The reference implementation's test vector (phc-winner-argon2,
	// src/test.c): password "password", salt "somesalt", other costs.
	const foreign = "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
	if ok, p, err := Verify(foreign, "password"); err != nil || !ok || p != (Params{MemoryKiB: 65536, Time: 2, Threads: 1}) {
		t.Fatalf("verify a foreign PHC hash: %v, %+v, %v", ok, p, err)
	}
}

func TestPHCRejectsDamagedOrHostileHashes(t *testing.T) {
	good := Hash("a long pass phrase", Default)
	f := strings.Split(good, "$")
	for name, h := range map[string]string{
		"empty":       "",
		"argon2i":     strings.Replace(good, "argon2id", "argon2i", 1),
		"bcrypt":      "$2a$10$abcdefghijklmnopqrstuu5d8Y0Qz6yJ5H7P1l3z8a0vZ3k0m1S2",
		"version":     strings.Replace(good, "v=19", "v=16", 1),
		"huge memory": "$argon2id$v=19$m=4294967295,t=2,p=1$" + f[4] + "$" + f[5],
		"huge time":   "$argon2id$v=19$m=19456,t=100000,p=1$" + f[4] + "$" + f[5],
		"no threads":  "$argon2id$v=19$m=19456,t=2,p=0$" + f[4] + "$" + f[5],
		"p > 255":     "$argon2id$v=19$m=19456,t=2,p=256$" + f[4] + "$" + f[5],
		"unknown key": "$argon2id$v=19$m=19456,t=2,x=1$" + f[4] + "$" + f[5],
		"bad salt":    "$argon2id$v=19$m=19456,t=2,p=1$***$" + f[5],
		"short hash":  "$argon2id$v=19$m=19456,t=2,p=1$" + f[4] + "$AAAA",
		"extra field": good + "$x",
	} {
		if _, _, err := Verify(h, "a long pass phrase"); err == nil {
			t.Errorf("%s: verified against %q", name, h)
		}
	}
}

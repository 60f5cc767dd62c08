package crypto

import (
	"bytes"
	"errors"
	"testing"
)

func testKey(t *testing.T) *Key {
	m, err := NewMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKey(m)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	for _, k := range []*Key{testKey(t), Null()} {
		plain := []byte("the quick brown fox")
		sealed := k.Seal([]byte("prefix"), plain, "chunk")
		if !bytes.HasPrefix(sealed, []byte("prefix")) || len(sealed) != 6+len(plain)+k.Overhead() {
			t.Fatalf("sealed layout wrong: %d bytes", len(sealed))
		}
		got, err := k.Open(nil, sealed[6:], "chunk")
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("open = %q, %v", got, err)
		}
		if _, err := k.Open(nil, sealed[6:], "index-block"); !errors.Is(err, ErrAuth) {
			t.Fatalf("wrong context accepted: %v", err)
		}
		for i := 6; i < len(sealed); i += 3 {
			bad := append([]byte(nil), sealed[6:]...)
			bad[i-6] ^= 1
			if _, err := k.Open(nil, bad, "chunk"); !errors.Is(err, ErrAuth) {
				t.Fatalf("bit flip at %d accepted (encrypted=%v)", i, k.Encrypted())
			}
		}
		if _, err := k.Open(nil, sealed[6:10], "chunk"); !errors.Is(err, ErrAuth) {
			t.Fatalf("truncated blob accepted: %v", err)
		}
	}
}

func TestEncryptedHidesPlaintext(t *testing.T) {
	k := testKey(t)
	plain := bytes.Repeat([]byte("secret"), 100)
	if bytes.Contains(k.Seal(nil, plain, "chunk"), []byte("secret")) {
		t.Fatal("plaintext visible in sealed blob")
	}
}

func TestChunkIDsAreKeyed(t *testing.T) {
	a, b := testKey(t), testKey(t)
	data := []byte("same data")
	if a.NewHasher().Sum(data) == b.NewHasher().Sum(data) {
		t.Fatal("two repositories give the same chunk ID: IDs leak content")
	}
	h := a.NewHasher()
	first, again, other := h.Sum(data), h.Sum(data), h.Sum([]byte("other"))
	if first != again || first == other {
		t.Fatal("hasher not deterministic or not reset between chunks")
	}
}

func TestWrapUnwrap(t *testing.T) {
	kdf := DefaultKDF()
	kdf.Time, kdf.MemoryKiB = 1, 8<<10 // fast for tests
	sealed, err := Wrap([]byte("master"), []byte("pw"), kdf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unwrap(sealed, []byte("pw"), kdf)
	if err != nil || string(got) != "master" {
		t.Fatalf("unwrap = %q, %v", got, err)
	}
	if _, err := Unwrap(sealed, []byte("wrong"), kdf); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	kdf.MemoryKiB = 1 << 30
	if _, err := Unwrap(sealed, []byte("pw"), kdf); err == nil {
		t.Fatal("absurd KDF parameters accepted")
	}
}

// Package id defines the 32-byte identifiers of a repository: chunk IDs
// (keyed BLAKE3 of the chunk's plaintext) and random IDs of snapshots,
// index segments and leases. Pack IDs are 16 bytes (see package pack).
package id

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// ID is a 32-byte identifier.
type ID [32]byte

// Zero is the all-zero ID. In a disk map it marks an all-zero chunk that is
// never stored; no real keyed hash equals it in practice.
var Zero ID

// Random returns a fresh random ID.
func Random() ID {
	var i ID
	if _, err := rand.Read(i[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return i
}

// Parse decodes a 64-character hex ID.
func Parse(s string) (ID, error) {
	var i ID
	if len(s) != 64 {
		return i, fmt.Errorf("invalid ID %q: want 64 hex characters", s)
	}
	if _, err := hex.Decode(i[:], []byte(s)); err != nil {
		return i, fmt.Errorf("invalid ID %q: %w", s, err)
	}
	return i, nil
}

// IsZero reports the zero ID.
func (i ID) IsZero() bool { return i == Zero }

// String is the full hex form.
func (i ID) String() string { return hex.EncodeToString(i[:]) }

// Short is the 8-character form shown to people.
func (i ID) Short() string { return hex.EncodeToString(i[:4]) }

// Less orders IDs bytewise.
func (i ID) Less(o ID) bool { return bytes.Compare(i[:], o[:]) < 0 }

// Compare returns -1, 0 or 1.
func (i ID) Compare(o ID) int { return bytes.Compare(i[:], o[:]) }

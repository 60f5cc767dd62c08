package storetest

import (
	"crypto/sha256"
	"hash"
)

type digest struct{ h hash.Hash }

func newDigest() *digest { return &digest{sha256.New()} }

func (d *digest) Write(p []byte) (int, error) { return d.h.Write(p) }

func (d *digest) sum() string { return string(d.h.Sum(nil)) }

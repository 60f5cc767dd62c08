package testutil

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Golden holds the committed bytes of on-disk objects, one directory per
// format version (testdata/golden/v1, v2, ...): what fixed inputs encode to
// under that version. A version's files never change once committed, so
// every older version's bytes stay in the tree for the decoders to read.
type Golden struct {
	// Dir holds the version directories (normally "testdata/golden").
	Dir string
	// Version is the format version this build writes.
	Version int
	// Bump names the constant to raise when the format changes on purpose.
	Bump string
	// Cmd is the command that records the files of a new version.
	Cmd string
	// Update records files the current version does not have yet (-update);
	// it refuses to change an existing one.
	Update bool
}

// Check compares got with the current version's file name.
func (g Golden) Check(t testing.TB, name string, got []byte) {
	t.Helper()
	g.CheckAs(t, name, got, func(b []byte) ([]byte, error) { return b, nil })
}

// CheckAs compares got with the current version's file name after both go
// through canon: for an object that embeds a compressor's output, canon
// replaces it by what it decompresses to, since the format is the frame's
// content, not one compressor version's choice of encoding.
func (g Golden) CheckAs(t testing.TB, name string, got []byte, canon func([]byte) ([]byte, error)) {
	t.Helper()
	path := g.path(g.Version, name)
	want, err := readHex(path)
	if errors.Is(err, os.ErrNotExist) && g.Update {
		if err := writeHex(path, got); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s (%d bytes)", path, len(got))
		return
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is missing: record it with `%s -update`", path, g.Cmd)
	}
	if err != nil {
		t.Fatal(err)
	}
	gotC, err := canon(got)
	if err != nil {
		t.Fatalf("%s: today's bytes: %v", name, err)
	}
	wantC, err := canon(want)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if bytes.Equal(gotC, wantC) {
		return
	}
	refusal := ""
	if g.Update {
		refusal = fmt.Sprintf("-update refuses to overwrite %s: version %d's bytes are fixed once committed.\n", path, g.Version)
	}
	t.Fatalf("%s: the on-disk format changed: today's encoding differs from %s at byte %d (of %d compared bytes; the file has %d).\n%s"+
		"If the change is on purpose, bump %s to %d and record testdata/golden/v%d with\n\t%s -update\n"+
		"and keep v%d: its bytes must stay readable (the decoding half of this test reads every version).",
		name, path, firstDifference(gotC, wantC), len(gotC), len(wantC), refusal, g.Bump, g.Version+1, g.Version+1, g.Cmd, g.Version)
}

// Versions lists the versions that have golden files, oldest first.
func (g Golden) Versions(t testing.TB) []int {
	t.Helper()
	entries, err := os.ReadDir(g.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		if m := versionDir.FindStringSubmatch(e.Name()); e.IsDir() && m != nil {
			v, _ := strconv.Atoi(m[1])
			out = append(out, v)
		}
	}
	sort.Ints(out)
	if len(out) == 0 || out[len(out)-1] != g.Version {
		t.Fatalf("%s has versions %v: the current version %d has no golden files; record them with `%s -update`", g.Dir, out, g.Version, g.Cmd)
	}
	return out
}

// Read returns the bytes of version v's file name.
func (g Golden) Read(t testing.TB, v int, name string) []byte {
	t.Helper()
	b, err := readHex(g.path(v, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var versionDir = regexp.MustCompile(`^v([0-9]+)$`)

func (g Golden) path(v int, name string) string {
	return filepath.Join(g.Dir, fmt.Sprintf("v%d", v), name+".hex")
}

func firstDifference(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// readHex reads a file of hex digits; whitespace is ignored.
func readHex(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// writeHex writes b as hex, 32 bytes a line, so that a diff shows where.
func writeHex(path string, b []byte) error {
	var s strings.Builder
	for len(b) > 0 {
		n := min(32, len(b))
		s.WriteString(hex.EncodeToString(b[:n]))
		s.WriteByte('\n')
		b = b[n:]
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(s.String()), 0o644)
}

package mediacopy

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadStream: whatever bytes a damaged tape returns as a point's
// stream, unpacking writes only repository objects inside its directory,
// or fails.
func FuzzReadStream(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range []string{"config", "keys/abc", "data/00/1234", "../escape", "locks/x"} {
		tw.WriteHeader(&tar.Header{Name: name, Size: 3, Mode: 0o600, Typeflag: tar.TypeReg})
		tw.Write([]byte("abc"))
	}
	tw.Close()
	f.Add(b.Bytes())
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "repo")
		_ = ReadStream(context.Background(), bytes.NewReader(data), dir)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(dir, p)
			if strings.HasPrefix(rel, "..") {
				t.Fatalf("wrote %s outside the repository", p)
			}
			top := strings.SplitN(rel, string(filepath.Separator), 2)[0]
			switch top {
			case "config", "keys", "snapshots", "maps", "index", "data", "tmp", ".cas-lock":
			default:
				t.Fatalf("wrote %s, not a repository object", rel)
			}
			return nil
		})
	})
}

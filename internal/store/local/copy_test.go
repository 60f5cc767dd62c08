package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestCopyFrom copies a pack between two stores on one filesystem with
// reflinks (cloned) and onto one without (ext4: copied by the kernel);
// the copy reads back the same, an existing name is refused and a store
// of another kind is left to the caller (errors.ErrUnsupported).
func TestCopyFrom(t *testing.T) {
	ctx := context.Background()
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)
	for _, tc := range []struct {
		fs, args string
		want     store.CopyMethod
	}{{"xfs", "reflink=1", store.CopyCloned}, {"ext4", "", store.CopyKernel}} {
		t.Run(tc.fs, func(t *testing.T) {
			var args []string
			if tc.args != "" {
				args = []string{"-q", "-m", tc.args}
			}
			mnt := testutil.MountLoopFS(t, tc.fs, 320<<20, args...)
			src, err := Create(filepath.Join(mnt, "a"))
			if err != nil {
				t.Fatal(err)
			}
			dst, err := Create(filepath.Join(mnt, "b"))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			defer dst.Close()
			if _, err := store.Put(ctx, src, "data/00112233", data, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			fi, m, err := dst.CopyFrom(ctx, src, "data/00112233", "data/44556677", store.PutOptions{})
			if err != nil || m != tc.want || fi.Size != int64(len(data)) {
				t.Fatalf("copy: %v, method %s, %d bytes; want %s", err, m, fi.Size, tc.want)
			}
			if got, err := store.Get(ctx, dst, "data/44556677", 0, -1); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the copy reads back different bytes (%v)", err)
			}
			if _, _, err := dst.CopyFrom(ctx, src, "data/00112233", "data/44556677", store.PutOptions{}); !errors.Is(err, store.ErrExists) {
				t.Fatalf("copy over an existing object: %v, want ErrExists", err)
			}
			if _, _, err := dst.CopyFrom(ctx, src, "data/missing", "data/8899", store.PutOptions{}); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("copy of a missing object: %v, want ErrNotFound", err)
			}
			if _, _, err := dst.CopyFrom(ctx, other{src}, "data/00112233", "data/aabb", store.PutOptions{}); !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("copy from a store of another kind: %v, want errors.ErrUnsupported", err)
			}
		})
	}
}

// other is a store of another kind (it does not unwrap to a local one).
type other struct{ store.Store }

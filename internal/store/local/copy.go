package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/store"
)

// CopyFrom makes name a copy of the object fromName of another local
// store: cloned by the filesystem where both are on one with reflinks
// (FICLONE), else copied by the kernel (copy_file_range), else by coffer.
// The copy is built unnamed and linked under name only when whole and
// synced (internal/offload), so a crash leaves nothing, and an existing
// name is refused (ErrExists). A store of another kind: errors.ErrUnsupported.
// Retention is not a local feature and is ignored, as Create does.
func (s *Store) CopyFrom(ctx context.Context, from store.Store, fromName, name string, _ store.PutOptions) (store.ObjectInfo, store.CopyMethod, error) {
	src, ok := store.Innermost(from).(*Store)
	if !ok {
		return store.ObjectInfo{}, "", fmt.Errorf("copy from %s: %w", from.Properties().Location, errors.ErrUnsupported)
	}
	in, err := src.path(fromName)
	if err != nil {
		return store.ObjectInfo{}, "", err
	}
	out, err := s.path(name)
	if err != nil {
		return store.ObjectInfo{}, "", err
	}
	if err := s.ensureDir(filepath.Dir(out)); err != nil {
		return store.ObjectInfo{}, "", err
	}
	st, err := offload.CopyFile(ctx, in, out, offload.CopyOptions{})
	if errors.Is(err, offload.ErrTargetExists) {
		return store.ObjectInfo{}, "", fmt.Errorf("copy to %s: %w", name, store.ErrExists)
	}
	if err != nil {
		return store.ObjectInfo{}, "", translate(err)
	}
	method := map[offload.Method]store.CopyMethod{offload.Cloned: store.CopyCloned, offload.KernelCopied: store.CopyKernel}[st.Method]
	if method == "" {
		method = store.CopyThroughHost
	}
	fi, err := s.Stat(context.WithoutCancel(ctx), name)
	return fi, method, err
}

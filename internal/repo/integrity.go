package repo

import (
	"errors"

	"github.com/coffer-backup/coffer/internal/repo/chunk"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
)

// IsDamaged reports whether err means repository data was found damaged:
// a chunk that fails verification, a pack, index segment or disk map that
// is not what its format says, a corrupt manifest, or a chunk the index
// does not know. The CLI maps these to the integrity exit code without
// knowing the object formats.
func IsDamaged(err error) bool {
	for _, target := range []error{chunk.ErrCorrupt, pack.ErrFormat, index.ErrFormat, diskmap.ErrFormat, ErrCorruptManifest, ErrChunkMissing} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

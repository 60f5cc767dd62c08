package service

import (
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/files"
)

// The documents of what reading files from a backed-up disk skipped or
// warned about, shared by the file browser and the restores from media.

// FileCacheBytes bounds the chunk cache of the random-access disk reader.
const FileCacheBytes = 64 << 20

// SkippedError makes anything skipped a partial failure; done says what
// happened to the rest.
func SkippedError(skipped []api.Skip, done string) error {
	if len(skipped) == 0 {
		return nil
	}
	return api.Errorf(api.Partial, "%s skipped (listed above); everything else was %s", Entries(len(skipped)), done)
}

func SkipDocs(sk []files.Skip) []api.Skip {
	out := make([]api.Skip, 0, len(sk))
	for _, s := range sk {
		out = append(out, api.Skip{Path: s.Path, Reason: s.Reason})
	}
	return out
}

func WarningDocs(d *files.Disk) []api.Warning {
	out := []api.Warning{}
	for _, w := range d.Warnings() {
		out = append(out, api.Warning{Message: w.Message, Count: w.Count})
	}
	return out
}

// Entries is "1 entry" or "N entries".
func Entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

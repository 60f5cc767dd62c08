package job

import (
	"context"
	"slices"
)

type resumesKey struct{}

// WithResumes returns a context whose operation carries on the jobs ids
// (oldest first): a fleet's forwarded backup of one VM, forwarded again
// after the leader that ran it as those jobs was lost. The operation's
// job settles their tasks before its first attempt.
func WithResumes(ctx context.Context, ids []int64) context.Context {
	if len(ids) == 0 {
		return ctx
	}
	return context.WithValue(ctx, resumesKey{}, slices.Clone(ids))
}

// ResumesFrom is what WithResumes put in ctx (nil: none).
func ResumesFrom(ctx context.Context) []int64 {
	ids, _ := ctx.Value(resumesKey{}).([]int64)
	return slices.Clone(ids)
}

package service

import (
	"cmp"
	"context"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/task"
	"github.com/coffer-backup/coffer/internal/transfer"
)

// Copy copies backup points of the repository to another repository of
// the configuration (call.To), opened with its own password.
func (s *Service) Copy(ctx context.Context, call *api.CopyInput) (*api.CopyResult, error) {
	st, err := s.latest(ctx)
	if err != nil {
		return nil, err
	}
	target, err := s.namedLocation(st.Engine, call.To)
	if err != nil {
		return nil, err
	}
	c := *s
	c.cfg.OtherPassword = target.Password
	return c.CopyWith(ctx, call.Body, CopyOptions{To: target.Location})
}

// CopyOptions name the repositories of a copy in ways the API does not:
// by location (the command line's --from and --to, the target opened
// with the other password) or by the names of maintenance copy jobs
// (each opened with its own password file); and NoOffload, the command
// line's switch of how this host copies.
type CopyOptions struct {
	// From is the source location ("": the default repository, opened
	// with its password); To the target, opened with the other password.
	From, To string
	// FromRepository and ToRepository name repositories entries instead
	// of locations (maintenance copy jobs), each opened with its own
	// password file.
	FromRepository, ToRepository string
	// NoOffload copies every chunk through coffer even where the storage
	// could copy whole packs (a clone, an S3 server-side copy).
	NoOffload bool
}

// CopyWith copies the backup points sel selects (IDs, prefixes, "latest";
// only those of a source; only the newest of each source) to a second
// repository, local or S3: only chunks the target lacks are written,
// points already there are skipped, so the same call is the recurring
// offsite job and resumes an interrupted one. sel.LockedUntil locks every
// copied point in the target until then (or as long as in the source, if
// longer); zero keeps the source's lock.
func (s *Service) CopyWith(ctx context.Context, sel api.CopyRequest, o CopyOptions) (*api.CopyResult, error) {
	if o.To == "" && o.ToRepository == "" {
		return nil, invalidf("--to is required")
	}
	spec := s.repoTask(task.KindCopy, cmp.Or(o.From, s.cfg.Repository.Location))
	if o.FromRepository != "" {
		spec = s.namedTask(task.KindCopy, o.FromRepository)
	}
	return run(ctx, s, withDetail(spec, "to "+cmp.Or(o.ToRepository, o.To)), func(ctx context.Context, t Task) (*api.CopyResult, error) {
		from, to := repoAt(o.From), otherRepoAt(o.To)
		if o.FromRepository != "" {
			from = namedRepo(o.FromRepository)
		}
		if o.ToRepository != "" {
			to = namedRepo(o.ToRepository)
		}
		return withRepo(ctx, s, from, noLease, func(src *repo.Repository) (*api.CopyResult, error) {
			return withRepo(ctx, s, to, noLease, func(dst *repo.Repository) (*api.CopyResult, error) {
				return s.copyBetween(ctx, t, src, dst, sel, o.NoOffload)
			})
		})
	})
}

// copyBetween copies the points in selects from src to dst (transfer
// takes the copy lease on src).
func (s *Service) copyBetween(ctx context.Context, t Task, src, dst *repo.Repository, in api.CopyRequest, noOffload bool) (*api.CopyResult, error) {
	if !in.LockedUntil.IsZero() && !dst.Store().Properties().Retention {
		return nil, invalidf("--immutable-for needs a target with retention (S3 Object Lock); %s has none", dst.Store().Properties().Location)
	}
	sel, err := copySelection(ctx, src, in)
	if err != nil {
		return nil, err
	}
	prog := &transfer.Progress{}
	t.Progress(Meter{Label: "copy", Done: prog.Bytes.Load, Total: func() int64 { return 0 }})
	res, err := transfer.Copy(ctx, src, dst, transfer.Options{Select: sel, Progress: prog, RetainUntil: in.LockedUntil, NoOffload: noOffload})
	if res != nil {
		s.reportPackCopy(t, res) // also for a failed copy: what it did stays done
	}
	if err != nil {
		return nil, err
	}
	o := res.Offload
	return &api.CopyResult{Copied: list(res.Copied), AlreadyPresent: list(res.AlreadyThere), ChunksRead: res.ChunksRead,
		ChunksWritten: res.ChunksWritten, WrittenBytes: res.BytesWritten, ReEncrypted: res.ReEncrypted,
		Offload: api.CopyOffload{Method: o.Method, PacksAdopted: o.PacksAdopted, ChunksAdopted: o.ChunksAdopted,
			BytesAdopted: o.BytesAdopted, PacksPartial: o.PacksPartial, Unavailable: o.Unavailable}}, nil
}

// copySelection builds the predicate for a copy's selection.
func copySelection(ctx context.Context, r *repo.Repository, in api.CopyRequest) (func(*repo.Point) bool, error) {
	want := map[string]bool{}
	for _, ref := range in.Points {
		s, err := r.FindPoint(ctx, ref)
		if err != nil {
			return nil, err
		}
		want[s.ID.String()] = true
	}
	newest := map[string]string{}
	if in.Latest {
		all, err := r.Points(ctx, nil)
		if err != nil {
			return nil, err
		}
		for _, s := range all { // oldest first: the last one wins
			newest[s.Source.Key()] = s.ID.String()
		}
	}
	return func(s *repo.Point) bool {
		if len(want) > 0 && !want[s.ID.String()] {
			return false
		}
		if in.VM != "" && !strings.EqualFold(s.Source.VMName, in.VM) {
			return false
		}
		return !in.Latest || newest[s.Source.Key()] == s.ID.String()
	}, nil
}

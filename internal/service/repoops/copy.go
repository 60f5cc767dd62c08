package repoops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"cmp"
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/transfer"
)

// Copy copies backup points of the repository to another repository of
// the configuration (call.To), opened with its own password.
func (s Ops) Copy(ctx context.Context, call *api.CopyInput) (*api.CopyResult, error) {
	return s.CopyWith(ctx, call.Body, CopyOptions{ToRepository: call.To})
}

// CopyOptions name the repositories of a copy in ways the API does not:
// by location (the command line's --from and --to, the target opened
// with the other password); and NoOffload, the command line's switch of
// how this host copies.
type CopyOptions struct {
	// From is the source location ("": the default repository, opened
	// with its password); To the target, opened with the other password.
	From, To string
	// ToRepository names a repositories entry instead of a location (the
	// API's to), opened with its own password file.
	ToRepository string
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
func (s Ops) CopyWith(ctx context.Context, sel api.CopyRequest, o CopyOptions) (*api.CopyResult, error) {
	if o.To == "" && o.ToRepository == "" {
		return nil, service.Invalidf("--to is required")
	}
	spec := s.RepoJob(job.KindCopy, cmp.Or(o.From, s.Config.Repository.Location))
	return service.Run(ctx, s.Service, service.WithDetail(spec, "to "+cmp.Or(o.ToRepository, o.To)), func(ctx context.Context, t service.Job) (*api.CopyResult, error) {
		from, to := service.RepoAt(o.From), service.OtherRepoAt(o.To)
		if o.ToRepository != "" {
			to = service.NamedRepo(o.ToRepository)
		}
		return service.WithRepo(ctx, s.Service, from, service.NoLease, func(src *repo.Repository) (*api.CopyResult, error) {
			return service.WithRepo(ctx, s.Service, to, service.NoLease, func(dst *repo.Repository) (*api.CopyResult, error) {
				return s.copyBetween(ctx, t, src, dst, sel, o.NoOffload)
			})
		})
	})
}

// copyBetween copies the points in selects from src to dst (transfer
// takes the copy lease on src).
func (s Ops) copyBetween(ctx context.Context, t service.Job, src, dst *repo.Repository, in api.CopyRequest, noOffload bool) (*api.CopyResult, error) {
	if !in.LockedUntil.IsZero() && !dst.Store().Properties().Retention {
		return nil, service.Invalidf("--immutable-for needs a target with retention (S3 Object Lock); %s has none", dst.Store().Properties().Location)
	}
	sel, err := service.CopySelection(ctx, src, in)
	if err != nil {
		return nil, err
	}
	prog := &transfer.Progress{}
	t.Progress(service.Meter{Label: "copy", Done: prog.Bytes.Load, Total: func() int64 { return 0 }})
	res, err := transfer.Copy(ctx, src, dst, transfer.Options{Select: sel, Progress: prog, RetainUntil: in.LockedUntil, NoOffload: noOffload})
	if res != nil {
		s.ReportPackCopy(t, res) // also for a failed copy: what it did stays done
	}
	if err != nil {
		return nil, err
	}
	o := res.Offload
	return &api.CopyResult{Copied: apidoc.NonNil(res.Copied), AlreadyPresent: apidoc.NonNil(res.AlreadyThere), ChunksRead: res.ChunksRead,
		ChunksWritten: res.ChunksWritten, WrittenBytes: res.BytesWritten, ReEncrypted: res.ReEncrypted,
		Offload: api.CopyOffload{Method: o.Method, PacksAdopted: o.PacksAdopted, ChunksAdopted: o.ChunksAdopted,
			BytesAdopted: o.BytesAdopted, PacksPartial: o.PacksPartial, Unavailable: o.Unavailable}}, nil
}

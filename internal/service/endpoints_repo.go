package service

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/retention"
)

// The endpoints of repository operations: what a request says becomes the
// operation's input. The repository is the one the request's {repo}
// names: the server hands every endpoint the service bound to it.

// RepoParam is the repository a request names.
// (Exported: huma reads the parameters of embedded structs
// only when their type is exported.)
type RepoParam = api.RepoParam

type initIn struct {
	RepoParam
	Body api.InitRequest
}

func epInit(ctx context.Context, s *Service, in *initIn) (*Result[*api.Repository], error) {
	if in.Body.NoEncryption {
		return result(s.Init(ctx, InitInput{NoEncryption: true, ChunkSizeBytes: in.Body.ChunkSizeBytes,
			PackSizeBytes: in.Body.PackSizeBytes, CompressionLevel: in.Body.CompressionLevel, KeyLabel: in.Body.KeyLabel}))
	}
	pw, err := password(s.cfg.Repository.Password)
	if err != nil {
		return nil, err
	}
	return result(s.Init(ctx, InitInput{Password: pw, ChunkSizeBytes: in.Body.ChunkSizeBytes,
		PackSizeBytes: in.Body.PackSizeBytes, CompressionLevel: in.Body.CompressionLevel, KeyLabel: in.Body.KeyLabel}))
}

type pointsIn struct {
	RepoParam
	VM    string `query:"vm" maxLength:"255" doc:"only the points of this source name"`
	Point string `query:"point" maxLength:"64" doc:"only this point: its ID, a unique ID prefix, or latest (reads one manifest, not all)"`
}

// epPoints lists a repository's points the caller may see: all of them
// with Repo.Audit on the repository, else those of the VMs it holds it on.
func epPoints(ctx context.Context, s *Service, in *pointsIn) (*Result[[]api.BackupPoint], error) {
	points, _, err := s.Points(ctx, PointsInput{VM: in.VM, Point: in.Point})
	if err != nil {
		return nil, err
	}
	return result(visible(ctx, s, auth.RepoAudit, points, func(p api.BackupPoint) []string {
		return auth.PointPaths(s.boundRepo, p.Connection, p.VM)
	}), nil)
}

type catalogPointsIn struct {
	VM         string `query:"vm" maxLength:"255" doc:"a VM's name or ID"`
	Repository string `query:"repository" maxLength:"255" doc:"a repository's ID, or its name in the server's configuration"`
	Limit      int    `query:"limit" minimum:"0" maximum:"1000" doc:"the page's size, newest first (0: 100)"`
	After      string `query:"after" maxLength:"200" doc:"the Coffer-Next header of the previous page: this page continues after it"`
}

// pointsPage is the size of a page of the catalog's points unless the
// request says.
const pointsPage = 100

// epCatalogPoints lists a page of the catalog's points the caller may
// see (a catalog holds 100,000s); Coffer-Next names the page's last
// point, where the next page starts.
func epCatalogPoints(ctx context.Context, s *Service, in *catalogPointsIn) (*Page[api.BackupPoint], error) {
	after, err := parsePointCursor(in.After)
	if err != nil {
		return nil, err
	}
	limit := cmp.Or(in.Limit, pointsPage)
	repoID, err := s.repositoryID(ctx, in.Repository)
	if err != nil {
		return nil, err
	}
	points, err := s.CatalogPoints(ctx, CatalogPointsInput{VM: in.VM, Repository: repoID, Limit: limit, After: after})
	if err != nil {
		return nil, err
	}
	page := &Page[api.BackupPoint]{Body: visible(ctx, s, auth.RepoAudit, points, func(p api.BackupPoint) []string {
		name := s.RepositoryName(p.Repository)
		if name == "" {
			// A repository this server has not opened yet: only rights on
			// every repository (or the VM) reach it.
			name = p.Repository
		}
		return auth.PointPaths(name, p.Connection, p.VM)
	})}
	if len(points) == limit {
		last := points[len(points)-1]
		page.Next = fmt.Sprintf("%d.%s.%s", last.Time.UnixMicro(), last.Repository, last.ID)
	}
	return page, nil
}

// parsePointCursor reads a Coffer-Next of the points listing: the time
// (µs), repository and ID of the last point of a page.
func parsePointCursor(s string) (catalog.PointCursor, error) {
	if s == "" {
		return catalog.PointCursor{}, nil
	}
	parts := strings.SplitN(s, ".", 3)
	var us int64
	var err error
	if len(parts) == 3 {
		us, err = strconv.ParseInt(parts[0], 10, 64)
	}
	if len(parts) != 3 || err != nil || parts[1] == "" || parts[2] == "" {
		return catalog.PointCursor{}, invalidf("after: %q is not the Coffer-Next header of a page of points", s)
	}
	return catalog.PointCursor{Time: time.UnixMicro(us).UTC(), Repository: parts[1], ID: parts[2]}, nil
}

// visible is the items the caller holds priv on through one of their
// paths ([] when none).
func visible[T any](ctx context.Context, s *Service, priv auth.Privilege, items []T, paths func(T) []string) []T {
	out := auth.Filter(s.actor(ctx), priv, items, paths)
	if out == nil {
		out = []T{}
	}
	return out
}

func epRebuildCatalog(ctx context.Context, s *Service, _ *RepoParam) (*Result[*api.CatalogRebuild], error) {
	return result(s.RebuildCatalog(ctx))
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type forgetIn struct {
	RepoParam
	Body api.ForgetRequest
}

func epForget(ctx context.Context, s *Service, in *forgetIn) (*Result[*api.ForgetResult], error) {
	k := in.Body.Keep
	keep := retention.Policy{Last: k.Last, Hourly: k.Hourly, Daily: k.Daily, Weekly: k.Weekly, Monthly: k.Monthly, Yearly: k.Yearly,
		Within: fromSeconds(k.WithinSeconds)}
	return result(s.Forget(ctx, ForgetInput{Keep: keep, VM: in.Body.VM, Tags: in.Body.Tags, DryRun: in.Body.DryRun,
		ForgetBootVerified: in.Body.ForgetBootVerified}))
}

func fromSeconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

type protectIn struct {
	RepoParam
	Body api.ProtectRequest
}

func epProtect(ctx context.Context, s *Service, in *protectIn) (*Result[[]api.ProtectResult], error) {
	return result(s.Protect(ctx, ProtectInput{Points: in.Body.Points, Remove: in.Body.Remove}))
}

type gcIn struct {
	RepoParam
	Body api.GCRequest
}

func epGC(ctx context.Context, s *Service, in *gcIn) (*Result[*api.GCReport], error) {
	b := in.Body
	return result(s.GC(ctx, GCInput{DryRun: b.DryRun, MemoryBytes: b.MemoryBytes, Wait: fromSeconds(b.WaitSeconds), RepackThreshold: b.RepackThreshold}))
}

func epStats(ctx context.Context, s *Service, _ *RepoParam) (*Result[*api.Stats], error) {
	return result(s.Stats(ctx))
}

func epRepositoryUsage(ctx context.Context, s *Service, _ *RepoParam) (*Result[*api.RepositoryUsage], error) {
	return result(s.RepositoryUsage(ctx))
}

type copyIn struct {
	RepoParam
	To   string `query:"to" required:"true" minLength:"1" maxLength:"255" doc:"the target repository's name in the server's configuration"`
	Body api.CopyRequest
}

// epCopy copies to another repository of the configuration, opened with
// its own password.
func epCopy(ctx context.Context, s *Service, in *copyIn) (*Result[*api.CopyResult], error) {
	st, err := s.latest(ctx)
	if err != nil {
		return nil, err
	}
	target, err := s.namedLocation(st.Engine, in.To)
	if err != nil {
		return nil, err
	}
	c := *s
	c.cfg.OtherPassword = target.Password
	b := in.Body
	return result(c.Copy(ctx, CopyInput{To: target.Location, Points: b.Points, VM: b.VM, Latest: b.Latest, LockedUntil: b.LockedUntil}))
}

type repairIn struct {
	RepoParam
	What string `path:"what" enum:"config,keys,index,packs,snapshots"`
	Body api.RepairRequest
}

func epRepair(ctx context.Context, s *Service, in *repairIn) (*Result[*api.RepairReport], error) {
	return result(s.Repair(ctx, RepairInput{What: in.What, DryRun: in.Body.DryRun}))
}

func epUndelete(ctx context.Context, s *Service, _ *RepoParam) (*Result[*api.UndeleteReport], error) {
	return result(s.Undelete(ctx))
}

func epKeys(ctx context.Context, s *Service, _ *RepoParam) (*Result[[]api.Key], error) {
	return result(s.Keys(ctx))
}

type addKeyIn struct {
	RepoParam
	Body api.AddKeyRequest
}

func epAddKey(ctx context.Context, s *Service, in *addKeyIn) (*Created[*api.Key], error) {
	k, err := s.AddKey(ctx, AddKeyInput{Password: []byte(in.Body.Password), Label: in.Body.Label})
	if err != nil {
		return nil, err
	}
	return created(k), nil
}

type keyIn struct {
	RepoParam
	Key string `path:"key" maxLength:"64" doc:"a key's ID or unique prefix"`
}

func epRemoveKey(ctx context.Context, s *Service, in *keyIn) (*Result[*api.KeyRemoval], error) {
	return result(s.RemoveKey(ctx, in.Key))
}

func epLeases(ctx context.Context, s *Service, _ *RepoParam) (*Result[[]api.Lease], error) {
	return result(s.Leases(ctx))
}

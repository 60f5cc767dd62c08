package repoops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// The endpoints of repository operations: what a request says becomes the
// operation's input. The repository is the one the request's {repo}
// names: the server hands every endpoint the service bound to it.

// RepoParam is the repository a request names.
// (Exported: huma reads the parameters of embedded structs
// only when their type is exported.)
type RepoParam = api.RepoParam

// pointsPage is the size of a page of the catalog's points unless the
// request says.
const pointsPage = 100

// CatalogPoints lists a page of the catalog's points the caller may see
// (a catalog holds 100,000s), and the cursor of the next page: the
// page's last point, where the next page starts (Coffer-Next).
func (s Ops) CatalogPoints(ctx context.Context, in *api.ListCatalogPointsInput) ([]api.BackupPoint, string, error) {
	after, err := parsePointCursor(in.After)
	if err != nil {
		return nil, "", err
	}
	limit := cmp.Or(in.Limit, pointsPage)
	repoID, err := s.RepositoryID(ctx, in.Repository)
	if err != nil {
		return nil, "", err
	}
	points, err := s.catalogPoints(ctx, catalogPointsQuery{VM: in.VM, Repository: repoID, Limit: limit, After: after})
	if err != nil {
		return nil, "", err
	}
	page := service.Visible(ctx, s.Service, auth.RepoAudit, points, func(p api.BackupPoint) []string {
		name := s.RepositoryName(p.Repository)
		if name == "" {
			// A repository this server has not opened yet: only rights on
			// every repository (or the VM) reach it.
			name = p.Repository
		}
		return auth.PointPaths(name, p.Connection, p.VM)
	})
	next := ""
	if len(points) == limit {
		last := points[len(points)-1]
		next = fmt.Sprintf("%d.%s.%s", last.Time.UnixMicro(), last.Repository, last.ID)
	}
	return page, next, nil
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
		return catalog.PointCursor{}, service.Invalidf("after: %q is not the Coffer-Next header of a page of points", s)
	}
	return catalog.PointCursor{Time: time.UnixMicro(us).UTC(), Repository: parts[1], ID: parts[2]}, nil
}

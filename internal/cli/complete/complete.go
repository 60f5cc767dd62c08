// Package complete gives the shell completions of `coffer completion
// bash|zsh|fish` their dynamic values: backup points, policies,
// connections, repositories and jobs, listed by the same operations the
// commands run (snapshots, config list, jobs): through the server when
// --server (COFFER_SERVER) is set, else from the configuration, the
// catalog and the repository here.
//
// A completion runs while someone waits at a prompt: it never waits
// longer than DefaultTimeout. A listing that has not answered by then (a server
// that does not answer, a catalog or repository that is slow to open) is
// abandoned, and the shell offers nothing.
package complete

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/configops"
)

// DefaultTimeout bounds a completion's listing.
const DefaultTimeout = 250 * time.Millisecond

// Timeout is DefaultTimeout, but for the tests that check the candidates,
// not the bound (a loaded test machine can take longer to open a catalog).
var Timeout = DefaultTimeout

// maxJobs and maxPoints are how many of the newest jobs and points a
// completion offers.
const maxJobs, maxPoints = 100, 200

// Kind is a kind of value the shell completes, with how to list its
// candidates ("VALUE\tdescription") on an App set up for the completion.
type Kind struct {
	Name string
	list func(ctx context.Context, a *command.App) ([]string, error)
}

// The kinds of values coffer completes.
var (
	// Points are backup points, by short ID, newest first, as `coffer
	// catalog points` lists them.
	Points = Kind{Name: "point", list: points}
	// Policies, Connections and Repositories are the configuration's
	// objects in effect, as `coffer config list KIND` lists them.
	Policies     = Kind{Name: "policy", list: objects(configobj.Policy)}
	Connections  = Kind{Name: "connection", list: objects(configobj.Connection)}
	Repositories = Kind{Name: "repository", list: repositories}
	// Jobs are the newest jobs' IDs, as `coffer jobs` lists them.
	Jobs = Kind{Name: "job", list: jobs}
)

// points come from the catalog, which answers at once, where the
// repository would first derive its key from the password: through a
// server, the points of its repository (--server-repository); here, every
// point the catalog recorded.
func points(ctx context.Context, a *command.App) ([]string, error) {
	in := api.ListCatalogPointsInput{Limit: maxPoints}
	if a.Remote != nil {
		in.Repository = a.Res.String("remote.repository")
	}
	list, err := command.RunOp[[]api.BackupPoint](ctx, a, "list-catalog-points", &in)
	out := make([]string, 0, len(list))
	for _, p := range list {
		out = append(out, p.ShortID+"\t"+p.Time.Local().Format("2006-01-02 15:04")+" "+p.VM)
	}
	return out, err
}

func objects(k configobj.Kind) func(context.Context, *command.App) ([]string, error) {
	return func(ctx context.Context, a *command.App) ([]string, error) {
		list, err := command.RunOp[[]api.ConfigObject](ctx, a, configops.ConfigOperationID("list", k), &api.ListConfigObjectsInput{})
		out := make([]string, 0, len(list))
		for _, o := range list {
			out = append(out, o.Name+"\t"+string(k)+" ("+o.Source+")")
		}
		return out, err
	}
}

// repositories are the configuration's, and "default", the repository
// setting's (the one commands use unless told otherwise).
func repositories(ctx context.Context, a *command.App) ([]string, error) {
	named, err := objects(configobj.Repository)(ctx, a)
	return append([]string{service.DefaultRepository + "\tthe repository setting's"}, named...), err
}

func jobs(ctx context.Context, a *command.App) ([]string, error) {
	list, err := command.RunOp[[]api.Job](ctx, a, "list-jobs", &api.ListJobsInput{Limit: maxJobs})
	out := make([]string, 0, len(list))
	for _, j := range list {
		what := j.Policy
		if what == "" {
			what = j.Object
		}
		out = append(out, strconv.FormatInt(j.ID, 10)+"\t"+strings.TrimSpace(fmt.Sprintf("%s %s %s", j.Kind, j.Status, what)))
	}
	return out, err
}

// Values are the candidates of kind k that start with toComplete, for
// cmd (its flags parsed by cobra) set up with the configuration file at
// configPath, listed within Timeout: none when the listing fails or is
// late.
func Values(cmd *cobra.Command, configPath string, k Kind, toComplete string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	done := make(chan []string, 1)
	go func() {
		// Abandoned when late: the process ends with the completion, and
		// closing what the listing holds open could wait as long as it.
		a, err := command.Completing(cmd, configPath)
		if err != nil {
			done <- nil
			return
		}
		list, err := k.list(ctx, a)
		a.Close()
		if err != nil {
			list = nil
		}
		done <- list
	}()
	var list []string
	select {
	case list = <-done:
	case <-ctx.Done():
		return nil
	}
	var out []string
	for _, c := range list {
		if strings.HasPrefix(c, toComplete) {
			out = append(out, c)
		}
	}
	return out
}

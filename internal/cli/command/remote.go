package command

import (
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/apiclient"

	"github.com/coffer-backup/coffer/internal/telemetry"
)

// The remote command line: with --server (COFFER_SERVER) and an API token
// (COFFER_TOKEN, --token-file), the commands an operator uses from another
// machine call the server's operations instead of opening the repository
// here: no repository password on the laptop. Other commands refuse, and
// say why.

// annotationRemote marks a command that works through a server too.
const annotationRemote = "remote"

// RemoteToo declares that cmd works through a server as well.
func RemoteToo(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationRemote] = "yes"
	return cmd
}

// setupRemote builds the client when a server is configured, and refuses
// the commands that do not work through one.
func (a *App) setupRemote(cmd *cobra.Command) error {
	url := a.Res.String("remote.url")
	if url == "" {
		return nil
	}
	if cmd.Annotations[annotationRemote] == "" && cmd.Runnable() && !a.completing {
		return Usagef("`%s` works on this host only and is not offered through a server: it reads or writes local "+
			"files, devices or processes the server cannot reach for you. Run it on the server's host, or without --server "+
			"(COFFER_SERVER). Through a server: %s", cmd.CommandPath(), strings.Join(remoteCommands(cmd.Root()), ", "))
	}
	token := a.Res.String("remote.token")
	if path := a.Res.Path("remote.token-file"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Usagef("token-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	c, err := apiclient.New(apiclient.Config{URL: url, Token: token, Fingerprint: a.Res.String("remote.fingerprint"),
		CAFile: a.Res.Path("remote.ca-file")})
	if err != nil {
		return err
	}
	a.Remote = c
	return nil
}

// remoteCommands lists the commands that work through a server, as their
// annotations say (so the refusal's list cannot drift from them), the
// subcommands of one parent together: "key add/list/remove".
func remoteCommands(root *cobra.Command) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		var subs []string
		for _, sub := range c.Commands() {
			if sub.Annotations[annotationRemote] != "" && sub.Runnable() && !sub.HasSubCommands() {
				subs = append(subs, sub.Name())
			}
		}
		if len(subs) > 0 {
			path := strings.TrimPrefix(c.CommandPath()+" ", root.Name()+" ")
			if c == root {
				out = append(out, subs...)
			} else {
				out = append(out, path+strings.Join(subs, "/"))
			}
		}
		for _, sub := range c.Commands() {
			if sub.HasSubCommands() {
				if sub.Annotations[annotationRemote] != "" && sub.Runnable() {
					out = append(out, strings.TrimPrefix(sub.CommandPath(), root.Name()+" "))
				}
				walk(sub)
			}
		}
	}
	walk(root)
	return out
}

// RemoteRequest fills in the server's repository.
func (a *App) RemoteRequest(r apiclient.Request) apiclient.Request {
	if r.Path == nil {
		r.Path = map[string]string{}
	}
	if r.Path["repo"] == "" {
		r.Path["repo"] = a.Res.String("remote.repository")
	}
	return r
}

// RunOp runs the operation with that ID on in, its input as the API
// takes it: through the server when there is one, else in this process.
// The command builds one input and prints one document, wherever the
// operation runs.
func RunOp[T any](ctx context.Context, a *App, id string, in any) (T, error) {
	doc, _, err := RunPage[T](ctx, a, id, in)
	return doc, err
}

// RunPage is RunOp for a paged listing: it also returns the cursor of the
// next page ("" after the last).
func RunPage[T any](ctx context.Context, a *App, id string, in any) (doc T, next string, err error) {
	if a.Remote != nil {
		r, err := apiclient.RequestOf(id, in)
		if err != nil {
			return doc, "", err
		}
		// The call's span: the server's spans of the request join its
		// trace (the client sends its traceparent).
		ctx, span := telemetry.Operation(ctx, id, true)
		next, err = a.Remote.CallPage(ctx, a.RemoteRequest(r), &doc)
		span.End(err)
		return doc, next, err
	}
	s, err := a.Service()
	if err != nil {
		return doc, "", err
	}
	v, next, err := s.InvokePage(ctx, id, in)
	if v == nil {
		return doc, next, err
	}
	doc, ok := v.(T)
	if !ok {
		return doc, "", api.Errorf(api.Internal, "operation %s answers with %T, not %T", id, v, doc)
	}
	return doc, next, err
}

// WorkerFlag adds --worker to an operation that may run on a worker of
// the fleet (through a server: the server hands it to the worker).
func WorkerFlag(f *pflag.FlagSet, w *api.WorkerParam) {
	f.StringVar(&w.Worker, "worker", "", "run on this worker of the fleet, on its host; paths are under its --restore-dir (through --server)")
}

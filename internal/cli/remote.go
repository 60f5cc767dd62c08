package cli

import (
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/apiclient"
)

// The remote command line: with --server (COFFER_SERVER) and an API token
// (COFFER_TOKEN, --token-file), the commands an operator uses from another
// machine call the server's operations instead of opening the repository
// here: no repository password on the laptop. Other commands refuse, and
// say why.

// annotationRemote marks a command that works through a server too.
const annotationRemote = "remote"

// remoteToo declares that cmd works through a server as well.
func remoteToo(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationRemote] = "yes"
	return cmd
}

// setupRemote builds the client when a server is configured, and refuses
// the commands that do not work through one.
func (a *app) setupRemote(cmd *cobra.Command) error {
	url := a.res.String("remote.url")
	if url == "" {
		return nil
	}
	if cmd.Annotations[annotationRemote] == "" && cmd.Runnable() {
		return usagef("`%s` works on this host only and is not offered through a server: it reads or writes local "+
			"files, devices or processes the server cannot reach for you. Run it on the server's host, or without --server "+
			"(COFFER_SERVER). Through a server: %s", cmd.CommandPath(), strings.Join(remoteCommands(cmd.Root()), ", "))
	}
	token := a.res.String("remote.token")
	if path := a.res.Path("remote.token-file"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return usagef("token-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	c, err := apiclient.New(apiclient.Config{URL: url, Token: token, Fingerprint: a.res.String("remote.fingerprint"),
		CAFile: a.res.Path("remote.ca-file")})
	if err != nil {
		return err
	}
	a.remote = c
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

// remoteRequest fills in the server's repository.
func (a *app) remoteRequest(r apiclient.Request) apiclient.Request {
	if r.Path == nil {
		r.Path = map[string]string{}
	}
	if r.Path["repo"] == "" {
		r.Path["repo"] = a.res.String("remote.repository")
	}
	return r
}

// runOp runs the operation with that ID on in, its input as the API
// takes it: through the server when there is one, else in this process.
// The command builds one input and prints one document, wherever the
// operation runs.
func runOp[T any](ctx context.Context, a *app, id string, in any) (T, error) {
	doc, _, err := runPage[T](ctx, a, id, in)
	return doc, err
}

// runPage is runOp for a paged listing: it also returns the cursor of the
// next page ("" after the last).
func runPage[T any](ctx context.Context, a *app, id string, in any) (doc T, next string, err error) {
	if a.remote != nil {
		r, err := apiclient.RequestOf(id, in)
		if err != nil {
			return doc, "", err
		}
		next, err = a.remote.CallPage(ctx, a.remoteRequest(r), &doc)
		return doc, next, err
	}
	s, err := a.service()
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

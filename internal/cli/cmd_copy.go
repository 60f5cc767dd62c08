package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/transfer"
)

func (a *app) cmdCopy() *cobra.Command {
	var from, to, name, immutable string
	var latest bool
	cmd := &cobra.Command{
		Use:   "copy --to REPO [SNAPSHOT...]",
		Short: "copy backup points to a second repository (offsite copy)",
		Long: `Copy backup points from the repository (--from, default --repo) to another
one (--to; its password from --to-password-file or COFFER_TO_PASSWORD), local
or S3 in any combination. Only chunks the target lacks are written; points
already there are skipped, so the same command is the recurring offsite job.
An interrupted copy is resumed by running it again.

Repositories with different keys are re-encrypted chunk by chunk; a target
made with ` + "`coffer init --copy-keys-from`" + ` shares chunk IDs, which lets
coffer ask the target before reading anything from the source.

A copied point keeps the lock (immutability) it has in the source. With
--immutable-for, every point copied by this run is locked in the target for
that long (or as long as in the source, if longer): its manifest, disk maps
and every pack it needs, and the target's config and keys with them. The
target must have retention (an S3 bucket with Object Lock).

EXAMPLES
    coffer copy --to s3://offsite/site-a --to-password-file /etc/coffer/offsite.pw
    coffer copy --to /mnt/usb/coffer --name web --latest
    coffer copy --to s3://vault/site-a --immutable-for 30d`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if to == "" {
				return usagef("--to is required")
			}
			retain, err := retainUntil(immutable)
			if err != nil {
				return err
			}
			src, err := a.openSource(cmd, from)
			if err != nil {
				return err
			}
			dst, err := a.openOtherRepo(ctx, to)
			if err != nil {
				return err
			}
			if !retain.IsZero() && !dst.Store().Properties().Retention {
				return usagef("--immutable-for needs a target with retention (S3 Object Lock); %s has none", dst.Store().Properties().Location)
			}
			sel, err := selection(cmd, src, args, name, latest)
			if err != nil {
				return err
			}
			prog := &transfer.Progress{}
			bar := a.startProgress("copy", func() int64 { return 0 }, prog.Bytes.Load, func() string { return "" })
			res, err := transfer.Copy(ctx, src, dst, transfer.Options{Select: sel, Progress: prog, RetainUntil: retain})
			bar.finish()
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			how := "same keys, no re-encryption"
			if res.ReEncrypted {
				how = "re-encrypted for the target"
			}
			a.printf("copied %d snapshot(s) (%d already there): %d chunk(s) read, %d written, %s added (%s)\n",
				len(res.Copied), len(res.AlreadyThere), res.ChunksRead, res.ChunksWritten, humanBytes(res.BytesWritten), how)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "source repository (default: --repo)")
	f.StringVar(&to, "to", "", "target repository")
	f.StringVar(&name, "name", "", "only points of this source name")
	f.BoolVar(&latest, "latest", false, "only the newest point of each source")
	f.StringVar(&immutable, "immutable-for", "", "lock the copied points in the target for this long (e.g. 30d; needs S3 Object Lock)")
	return cmd
}

func (a *app) openSource(cmd *cobra.Command, from string) (*repo.Repository, error) {
	if from == "" {
		return a.openRepo(cmd.Context())
	}
	pw, err := a.password(false)
	if err != nil {
		return nil, err
	}
	return a.openRepoAt(cmd.Context(), from, pw)
}

// selection builds the predicate for copy's arguments.
func selection(cmd *cobra.Command, r *repo.Repository, refs []string, name string, latest bool) (func(*repo.Snapshot) bool, error) {
	want := map[string]bool{}
	for _, ref := range refs {
		s, err := r.FindSnapshot(cmd.Context(), ref)
		if err != nil {
			return nil, err
		}
		want[s.ID.String()] = true
	}
	newest := map[string]string{}
	if latest {
		all, err := r.Snapshots(cmd.Context(), nil)
		if err != nil {
			return nil, err
		}
		for _, s := range all { // oldest first: the last one wins
			newest[s.Source.Key()] = s.ID.String()
		}
	}
	return func(s *repo.Snapshot) bool {
		if len(want) > 0 && !want[s.ID.String()] {
			return false
		}
		if name != "" && !strings.EqualFold(s.Source.VMName, name) {
			return false
		}
		return !latest || newest[s.Source.Key()] == s.ID.String()
	}, nil
}

package repocmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/repoops"
)

func (a *app) cmdCopy() *cobra.Command {
	var sel api.CopyRequest
	var o repoops.CopyOptions
	var immutable string
	cmd := &cobra.Command{
		Use:   "copy --to REPO [SNAPSHOT...]",
		Short: "copy backup points to a second repository (offsite copy)",
		Long: command.Manual(`Copy backup points from the repository (--from, default --repo) to another
one (--to; its password from --to-password-file or COFFER_TO_PASSWORD), local
or S3 in any combination. Only chunks the target lacks are written; points
already there are skipped, so the same command is the recurring offsite job.
An interrupted copy is resumed by running it again.

Repositories with different keys are re-encrypted chunk by chunk; a target
made with `+"`coffer init --copy-keys-from`"+` shares chunk IDs, which lets
coffer ask the target before reading anything from the source.

With the same master key, a source pack whose every chunk the copy needs
and the target lacks is copied whole by the storage, without passing
through this host: cloned (FICLONE) between two local repositories on one
filesystem with reflinks (XFS reflink=1, btrfs), copied server-side
(CopyObject) between two buckets or prefixes of one S3 service. Other
packs, and every pack the storage cannot copy, go chunk by chunk through
coffer; --no-offload sends everything that way. The task log and the
coffer_offload_bytes_total metric say which path the bytes took.

A copied point keeps the object lock it has in the source. With
--immutable-for, every point copied by this run is locked in the target for
that long (or as long as in the source, if longer): its manifest, disk maps
and every pack it needs, and the target's config and keys with them. The
target must have retention (an S3 bucket with Object Lock).

Through a server (--server), --from and --to name repositories of the
server's configuration (--from defaults to its repository), each opened
with its own password there.`,
			`"copied N backup point(s) (M already there): ..." and whether chunks were
re-encrypted. --json: {copied, already_present, chunks_read,
chunks_written, written_bytes, re_encrypted, offload: {method,
packs_adopted, chunks_adopted, adopted_bytes, packs_partial, unavailable}}.`,
			`coffer copy --to s3://offsite/site-a --to-password-file /etc/coffer/offsite.pw
coffer copy --to /mnt/usb/coffer --name web --latest
coffer copy --to s3://vault/site-a --immutable-for 30d`,
			"0; 2 for --immutable-for on a target that cannot lock; 3 for a wrong target password."),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel.Points = append([]string{}, args...)
			var err error
			if sel.LockedUntil, err = command.RetainUntil(immutable); err != nil {
				return err
			}
			res, err := a.copy(cmd.Context(), sel, o)
			if err != nil {
				return err
			}
			return a.Emit(res, nil, func() {
				how := "same keys, no re-encryption"
				if res.ReEncrypted {
					how = "re-encrypted for the target"
				}
				a.Printf("copied %d backup point(s) (%d already there): %d chunk(s) read, %d written, %s added (%s)\n",
					len(res.Copied), len(res.AlreadyPresent), res.ChunksRead, res.ChunksWritten, command.HumanBytes(res.WrittenBytes), how)
				if o := res.Offload; o.PacksAdopted > 0 {
					a.Printf("%d whole pack(s), %s, %s by the storage\n", o.PacksAdopted, command.HumanBytes(o.BytesAdopted), o.Method)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.From, "from", "", "source repository (default: --repo)")
	f.StringVar(&o.To, "to", "", "target repository")
	f.StringVar(&sel.VM, "name", "", "only points of this source name")
	f.BoolVar(&sel.Latest, "latest", false, "only the newest point of each source")
	f.BoolVar(&o.NoOffload, "no-offload", false, "copy every chunk through coffer, even where the storage could copy whole packs")
	f.StringVar(&immutable, "immutable-for", "", "lock the copied points in the target for this long (e.g. 30d; needs S3 Object Lock)")
	return command.RemoteToo(command.Op(cmd, "copy"))
}

// copy copies here between the repositories --from and --to locate, or
// through the server between two repositories of its configuration that
// --from and --to name: the operation names repositories, not locations,
// and the server's storage decides how it copies (no --no-offload).
func (a *app) copy(ctx context.Context, sel api.CopyRequest, o repoops.CopyOptions) (*api.CopyResult, error) {
	if a.Remote == nil {
		return command.Call(a.App, func(s *service.Service) (*api.CopyResult, error) {
			return repoops.Ops{Service: s}.CopyWith(ctx, sel, o)
		})
	}
	if o.NoOffload {
		return nil, command.Usagef("--no-offload works on this host only: through a server, the server's storage decides how it copies")
	}
	if o.To == "" {
		return nil, command.Usagef("--to is required")
	}
	return command.RunOp[*api.CopyResult](ctx, a.App, "copy", &api.CopyInput{RepoParam: api.RepoParam{Repo: o.From}, To: o.To, Body: sel})
}

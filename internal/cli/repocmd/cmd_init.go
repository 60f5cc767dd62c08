package repocmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/repoops"
)

type initOptions struct {
	noEncryption bool
	chunkSize    string
	packSize     string
	level        int
	label        string
	keysFrom     string
}

func (a *app) cmdInit() *cobra.Command {
	var o initOptions
	cmd := &cobra.Command{
		Use:   "init",
		Short: "create a repository",
		Long: command.Manual(`Create a new, empty repository at --repo (a directory, created if missing,
or s3://bucket/prefix).

The repository is encrypted (AES-256-GCM, chunk IDs are keyed BLAKE3 hashes)
with a random master key protected by the password (argon2id). Keep the
password safe: without it (or another key added with `+"`coffer key add`"+`)
the backups cannot be read.`,
			`"created repository ID at LOCATION (...)", and a warning when the storage
does not enforce conditional writes. --json: {id, location,
format_version, created, encryption, chunk_size_bytes, pack_size_bytes,
compression, compression_level, conditional_writes, object_lock}.`,
			`COFFER_REPO=/srv/backup COFFER_PASSWORD_FILE=/etc/coffer/pw coffer init
coffer init --repo s3://backups/site-a --chunk-size 4MiB`,
			"0; 2 when a repository exists there already, or without a password."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := api.InitRepositoryInput{Body: api.InitRequest{NoEncryption: o.noEncryption, CompressionLevel: o.level, KeyLabel: o.label}}
			local := repoops.InitOptions{CopyKeysFrom: o.keysFrom}
			cs, err := command.ParseSize(o.chunkSize)
			if err != nil {
				return api.WithClass(api.Invalid, err)
			}
			ps, err := command.ParseSize(o.packSize)
			if err != nil {
				return api.WithClass(api.Invalid, err)
			}
			in.Body.PackSizeBytes = int(ps)
			if cmd.Flags().Changed("chunk-size") || o.keysFrom == "" {
				in.Body.ChunkSizeBytes = int(cs) // else the other repository's, so copies deduplicate
			}
			if a.Res.String("repository") == "" {
				return command.Usagef("no repository given: use --repo, COFFER_REPO or `repository:` in the configuration file")
			}
			if !o.noEncryption {
				if local.Password, err = a.Password(true); err != nil {
					return err
				}
			}
			// init creates the repository at --repo, on this host (the
			// API's init creates a repository of the server's
			// configuration): the password asked for twice and the key
			// source are options of this process.
			cfg, err := command.Call(a.App, func(s *service.Service) (*api.Repository, error) {
				return repoops.Ops{Service: s}.InitWith(cmd.Context(), &in, local)
			})
			if err != nil {
				return err
			}
			return a.Emit(cfg, nil, func() {
				a.Printf("created repository %s at %s (encryption %s, chunk size %s, zstd level %d)\n",
					command.Short(cfg.ID), cfg.Location, cfg.Encryption, command.HumanBytes(int64(cfg.ChunkSizeBytes)), cfg.CompressionLevel)
				if !cfg.ConditionalWrites {
					a.Printf("warning: the storage does not enforce conditional writes; see docs/02-first-backup.md (S3 repositories) for what coffer falls back to\n")
				}
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.noEncryption, "insecure-no-encryption", false, "store data unencrypted (integrity is still checked)")
	f.StringVar(&o.chunkSize, "chunk-size", "256KiB", "chunk size: a power of two from 64KiB to 16MiB (smaller: less growth per incremental; larger: less memory per TiB of disk)")
	f.StringVar(&o.packSize, "pack-size", "16MiB", "target size of pack files")
	f.IntVar(&o.level, "compression-level", 1, "zstd level 1 (fastest) to 19; -1 disables compression")
	f.StringVar(&o.label, "key-label", "initial", "label of the first key")
	f.StringVar(&o.keysFrom, "copy-keys-from", "", "reuse the master key of this repository (opened with --to-password-file) so copies between them need no re-encryption")
	return command.Op(cmd, "init-repository")
}

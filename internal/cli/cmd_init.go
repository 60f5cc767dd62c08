package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
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
		Long: `Create a new, empty repository at --repo (a directory, created if missing,
or s3://bucket/prefix).

The repository is encrypted (AES-256-GCM, chunk IDs are keyed BLAKE3 hashes)
with a random master key protected by the password (argon2id). Keep the
password safe: without it (or another key added with ` + "`coffer key add`" + `)
the backups cannot be read.

EXAMPLES
    COFFER_REPO=/srv/backup COFFER_PASSWORD_FILE=/etc/coffer/pw coffer init
    coffer init --repo s3://backups/site-a --chunk-size 4MiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runInit(cmd, o) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.noEncryption, "insecure-no-encryption", false, "store data unencrypted (integrity is still checked)")
	f.StringVar(&o.chunkSize, "chunk-size", "256KiB", "chunk size: a power of two from 64KiB to 16MiB (smaller: less growth per incremental; larger: less memory per TiB of disk)")
	f.StringVar(&o.packSize, "pack-size", "16MiB", "target size of pack files")
	f.IntVar(&o.level, "compression-level", 1, "zstd level 1 (fastest) to 19; -1 disables compression")
	f.StringVar(&o.label, "key-label", "initial", "label of the first key")
	f.StringVar(&o.keysFrom, "copy-keys-from", "", "reuse the master key of this repository (opened with --to-password-file) so copies between them need no re-encryption")
	return cmd
}

func (a *app) runInit(cmd *cobra.Command, o initOptions) error {
	ctx := cmd.Context()
	cs, err := parseSize(o.chunkSize)
	if err != nil {
		return usageError{err}
	}
	ps, err := parseSize(o.packSize)
	if err != nil {
		return usageError{err}
	}
	location := a.res.String("repository")
	if location == "" {
		return usagef("no repository given: use --repo, COFFER_REPO or `repository:` in the configuration file")
	}
	if !isURL(location) {
		if _, err := local.Create(location); err != nil {
			return err
		}
	}
	st, err := a.openStore(ctx, location)
	if err != nil {
		return err
	}
	defer st.Close()
	var pw []byte
	if !o.noEncryption {
		if pw, err = a.password(true); err != nil {
			return err
		}
		if len(pw) == 0 {
			return usagef("a password is required: use --password-file, COFFER_PASSWORD_FILE or COFFER_PASSWORD (or --insecure-no-encryption)")
		}
	}
	io := repo.InitOptions{Password: pw, NoEncryption: o.noEncryption, ChunkSize: int(cs),
		PackSize: int(ps), CompressionLevel: o.level, KeyLabel: o.label}
	if o.keysFrom != "" {
		other, err := a.openOtherRepo(ctx, o.keysFrom)
		if err != nil {
			return fmt.Errorf("--copy-keys-from: %w", err)
		}
		m := other.Key().Master()
		io.Master = &m
		if !cmd.Flags().Changed("chunk-size") {
			io.ChunkSize = other.Config().ChunkSize // same spans, so copies deduplicate
		}
	}
	cfg, err := repo.Init(ctx, st, io)
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(cfg)
	}
	a.printf("created repository %s at %s (encryption %s, chunk size %s, zstd level %d)\n",
		cfg.ID[:8], st.Properties().Location, cfg.Encryption, humanBytes(int64(cfg.ChunkSize)), cfg.CompressionLevel)
	if !cfg.ConditionalWrites {
		a.printf("warning: the storage does not enforce conditional writes; see the README (S3) for what coffer falls back to\n")
	}
	return nil
}

func isURL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return i+2 < len(s) && s[i+1] == '/' && s[i+2] == '/'
		}
		if s[i] == '/' {
			return false
		}
	}
	return false
}

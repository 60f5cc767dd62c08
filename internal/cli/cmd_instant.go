package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/restore"
)

// exportCacheChunks bounds the chunk cache of an NBD export (1 MiB each by
// default); a booting guest rereads the same blocks often.
const exportCacheChunks = 256

// nbdExport adapts a backup point's disk to the NBD server.
type nbdExport struct{ *restore.DiskReader }

func (e nbdExport) Allocated() []nbd.Extent {
	var out []nbd.Extent
	for _, x := range e.DiskReader.Allocated() {
		out = append(out, nbd.Extent{Offset: x.Offset, Length: x.Length})
	}
	return out
}

func (a *app) cmdInstant() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "instant",
		Short: "instant recovery: serve backup points as NBD block devices",
	}
	var listen string
	export := &cobra.Command{
		Use:   "export BACKUP [--listen unix:PATH|tcp:HOST:PORT]",
		Short: "serve every disk of a backup point, read-only, straight from the repository",
		Long: `Serve the disks of a backup point as NBD exports (fixed newstyle, structured
replies, base:allocation), read on demand from the repository through a
bounded chunk cache. Export names are the disk keys ("vda"). A VM boots
from them with a local copy-on-write overlay, for example:

  -blockdev driver=nbd,node-name=nbd0,server.type=unix,server.path=PATH,export=vda,read-only=on,reconnect-delay=10
  -blockdev driver=qcow2,node-name=vda,file.driver=file,file.filename=overlay.qcow2,backing=nbd0

Runs until interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runInstantExport(cmd.Context(), args[0], listen)
		},
	}
	export.Flags().StringVar(&listen, "listen", "tcp:127.0.0.1:10809", "where to listen: unix:PATH or tcp:HOST:PORT")
	cmd.AddCommand(export)
	return cmd
}

func (a *app) runInstantExport(ctx context.Context, ref, listen string) error {
	network, addr, ok := strings.Cut(listen, ":")
	if !ok || (network != "unix" && network != "tcp") {
		return usagef("--listen must be unix:PATH or tcp:HOST:PORT, not %q", listen)
	}
	r, err := a.openRepo(ctx)
	if err != nil {
		return err
	}
	s, err := r.FindSnapshot(ctx, ref)
	if err != nil {
		return err
	}
	exports := map[string]nbd.Export{}
	var names []string
	for _, d := range s.Disks {
		dr, err := restore.OpenDisk(ctx, r, d, exportCacheChunks)
		if err != nil {
			return err
		}
		exports[d.Key] = nbdExport{dr}
		names = append(names, d.Key)
	}
	if len(names) > 0 {
		exports[""] = exports[names[0]] // the default export is the first disk
	}
	if network == "unix" {
		os.Remove(addr)
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	a.printf("serving %d disk(s) of snapshot %s on %s (exports: %s)\n", len(names), s.ID.Short(), listen, strings.Join(names, ", "))
	srv := &nbd.Server{
		Lookup: func(n string) (nbd.Export, bool) { e, ok := exports[n]; return e, ok },
		List:   func() []string { return names },
		Log:    a.log,
	}
	if err := srv.Serve(ctx, l); err != nil {
		return fmt.Errorf("nbd server: %w", err)
	}
	return nil
}

package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
)

func (a *app) cmdInstant() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "instant",
		Short: "instant recovery: run a VM straight from its backup, then move it to production storage",
		Long: `Instant recovery runs a QEMU VM from a backup point within seconds: coffer
serves the point's disks over NBD straight from the repository, and the
VM, started from the command line recorded at backup time, writes to local
copy-on-write overlays. While it runs, ` + "`coffer instant commit`" + ` moves it
onto production storage (QEMU block mirror, then a switch in one step) and
coffer stops serving; ` + "`coffer instant discard`" + ` throws it away instead.

If coffer's NBD server dies, the VM's reads wait (--reconnect-delay), then
the VM pauses rather than seeing errors; ` + "`coffer instant serve ID`" + ` brings
the server back and resumes the VM.

EXAMPLES
    coffer instant start latest              # runs until committed or discarded
    coffer instant list
    coffer instant commit 3fa2c1d0 --to /var/lib/images/web-1
    coffer instant discard 3fa2c1d0`,
	}
	cmd.AddCommand(a.cmdInstantStart(), a.cmdInstantServe(), a.cmdInstantList(), a.cmdInstantCommit(),
		a.cmdInstantDiscard(), a.cmdInstantExport())
	return cmd
}

func (a *app) instantStateDir() string { return a.res.Path("state-dir") }

func (a *app) cmdInstantStart() *cobra.Command {
	var delay time.Duration
	cmd := &cobra.Command{
		Use:   "start BACKUP",
		Short: "start the VM of a backup point, running from the repository",
		Long: `Serve the backup point's disks, create one overlay per disk and start the
VM (QEMU, daemonized, console in the session directory). The command then
keeps serving the disks until the session is committed or discarded (or
it is interrupted: the VM then waits for ` + "`coffer instant serve`" + `).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			// The lease lasts as long as the VM reads from the point.
			r, snap, release, err := a.openPoint(ctx, args[0], "instant recovery of "+args[0])
			if err != nil {
				return err
			}
			defer release()
			began := time.Now()
			s, wait, err := instant.Start(ctx, r, snap, instant.StartOptions{StateDir: a.instantStateDir(), ReconnectDelay: delay, Log: a.log})
			if err != nil {
				return err
			}
			if a.jsonOut {
				a.printJSON(s)
			} else {
				a.printf("session %s: VM %s running from backup point %s (started in %.1fs)\n", s.ID, s.VM, snap.ID.Short(), time.Since(began).Seconds())
				a.printf("  monitor %s\n  console %s\n", s.QMPSocket, s.Console)
				a.printf("serving its disks until `coffer instant commit %s --to DIR` or `coffer instant discard %s`\n", s.ID, s.ID)
			}
			return wait()
		},
	}
	cmd.Flags().DurationVar(&delay, "reconnect-delay", 30*time.Second, "how long the VM's reads wait for a lost server before the VM pauses")
	return cmd
}

func (a *app) cmdInstantServe() *cobra.Command {
	return &cobra.Command{
		Use:   "serve ID",
		Short: "serve a session's disks again after its server died, and resume the VM",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := instant.Load(a.instantStateDir(), args[0])
			if err != nil {
				return err
			}
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			lease, err := r.AcquireLease(ctx, "restore", "", "instant recovery "+s.ID, false)
			if err != nil {
				return err
			}
			defer lease.Release(context.WithoutCancel(ctx))
			srv, err := instant.Reserve(ctx, r, s, a.log)
			if err != nil {
				return err
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx) }()
			resumed, err := qemu.Resume(ctx, s.QMPSocket)
			if err != nil {
				a.log.Warn("could not resume the VM", "err", err)
			}
			a.printf("session %s: serving again", s.ID)
			if resumed {
				a.printf("; VM %s resumed", s.VM)
			}
			a.printf("\n")
			return <-served
		},
	}
}

type instantDoc struct {
	*instant.Session
	ServerRunning bool `json:"server_running"`
	VMRunning     bool `json:"vm_running"`
}

func (a *app) cmdInstantList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list instant recovery sessions and their state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := instant.List(a.instantStateDir())
			if err != nil {
				return err
			}
			docs := []instantDoc{}
			for _, s := range ss {
				docs = append(docs, instantDoc{s, s.ServerAlive(), s.VMAlive()})
			}
			if a.jsonOut {
				a.printJSON(docs)
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tVM\tSTATE\tVM RUNNING\tSERVER\tSTARTED\tTARGETS")
			for _, d := range docs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%s\t%s\n", d.ID, d.VM, d.State, yesNo(d.VMRunning), yesNo(d.ServerRunning),
					d.Started.Local().Format(time.DateTime), strings.Join(d.Targets, " "))
			}
			tw.Flush()
			return nil
		},
	}
}

func (a *app) cmdInstantCommit() *cobra.Command {
	var to, format string
	cmd := &cobra.Command{
		Use:   "commit ID --to DIR",
		Short: "move the running VM onto production storage and stop serving its backup",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := instant.Load(a.instantStateDir(), args[0])
			if err != nil {
				return err
			}
			began := time.Now()
			dir, err := filepath.Abs(to)
			if err != nil {
				return err
			}
			if err := instant.Commit(ctx, s, dir, format); err != nil {
				return err
			}
			if a.jsonOut {
				a.printJSON(s)
				return nil
			}
			a.printf("session %s: VM %s now runs from %s (moved in %.1fs); the backup is no longer read\n",
				s.ID, s.VM, strings.Join(s.Targets, ", "), time.Since(began).Seconds())
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "directory for the VM's disks on production storage (required)")
	cmd.Flags().StringVar(&format, "format", "qcow2", "disk format: raw or qcow2")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func (a *app) cmdInstantDiscard() *cobra.Command {
	return &cobra.Command{
		Use:   "discard ID",
		Short: "stop a VM running from its backup and delete what it wrote (a committed VM is left running)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := instant.Load(a.instantStateDir(), args[0])
			if err != nil {
				return err
			}
			if err := instant.Discard(cmd.Context(), s); err != nil {
				return err
			}
			a.printf("session %s discarded\n", s.ID)
			return nil
		},
	}
}

func (a *app) cmdInstantExport() *cobra.Command {
	var listen string
	export := &cobra.Command{
		Use:   "export BACKUP [--listen unix:PATH|tcp:HOST:PORT]",
		Short: "serve every disk of a backup point, read-only, straight from the repository",
		Long: `Serve the disks of a backup point as NBD exports (fixed newstyle, structured
replies, base:allocation), read on demand from the repository through a
bounded chunk cache. Export names are the disk keys ("vda"). Any NBD
client can read them (qemu-img, nbdinfo, nbd-client); a VM on another
host boots from them with a local copy-on-write overlay:

  -blockdev driver=nbd,node-name=nbd0,server.type=unix,server.path=PATH,export=vda,read-only=on,reconnect-delay=10
  -blockdev driver=qcow2,node-name=vda,file.driver=file,file.filename=overlay.qcow2,backing=nbd0

Runs until interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runInstantExport(cmd.Context(), args[0], listen)
		},
	}
	export.Flags().StringVar(&listen, "listen", "tcp:127.0.0.1:10809", "where to listen: unix:PATH or tcp:HOST:PORT")
	return export
}

func (a *app) runInstantExport(ctx context.Context, ref, listen string) error {
	network, addr, ok := strings.Cut(listen, ":")
	if !ok || (network != "unix" && network != "tcp") {
		return usagef("--listen must be unix:PATH or tcp:HOST:PORT, not %q", listen)
	}
	r, s, release, err := a.openPoint(ctx, ref, "nbd export of "+ref)
	if err != nil {
		return err
	}
	defer release()
	exports, names, err := nbdexport.Exports(ctx, r, s)
	if err != nil {
		return err
	}
	l, err := nbdexport.Listen(network, addr)
	if err != nil {
		return err
	}
	a.printf("serving %d disk(s) of snapshot %s on %s (exports: %s)\n", len(names), s.ID.Short(), listen, strings.Join(names, ", "))
	return nbdexport.Serve(ctx, l, exports, names, a.log)
}

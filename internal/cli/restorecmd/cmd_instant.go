package restorecmd

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/restoreops"
)

func (a *app) cmdInstant() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "instant",
		Short: "instant recovery: run a VM straight from its backup, then move it to production storage",
		Long: command.Manual(`Instant recovery runs a QEMU VM from a backup point within seconds: coffer
serves the point's disks over NBD straight from the repository, and the
VM, started from the command line recorded at backup time, writes to local
copy-on-write overlays. While it runs, `+"`coffer instant commit`"+` moves it
onto production storage (QEMU block mirror, then a switch in one step) and
coffer stops serving; `+"`coffer instant discard`"+` throws it away instead.

If coffer's NBD server dies, the VM's reads wait (--reconnect-delay), then
the VM pauses rather than seeing errors; `+"`coffer instant serve ID`"+` brings
the server back and resumes the VM. Sessions live in the state directory.`,
			"See the subcommands.",
			`coffer instant start latest              # runs until committed or discarded
coffer instant list
coffer instant commit 3fa2c1d0 --to /var/lib/images/web-1
coffer instant discard 3fa2c1d0`,
			"That of the subcommand."),
	}
	cmd.AddCommand(a.cmdInstantStart(), a.cmdInstantServe(), a.cmdInstantList(), a.cmdInstantCommit(),
		a.cmdInstantDiscard(), a.cmdInstantExport())
	return cmd
}

// sessionOutput is what instant commands print with --json.
const sessionOutput = `--json: the session document {id, point_id, repository, vm, dir,
nbd_socket, qmp_socket, console, server_pid, vm_pid, disks: [{key,
size_bytes, overlay}], state, started, targets, server_running,
vm_running, and for a libvirt domain connection, domain, domain_id;
for a vSphere VM also platform, datastore, nfs_address}.`

func (a *app) cmdInstantStart() *cobra.Command {
	var delay time.Duration
	var conn, name, datastore, host, nfsListen, nfsAddress string
	cmd := &cobra.Command{
		Use:   "start BACKUP",
		Short: "start the VM of a backup point, running from the repository",
		Long: command.Manual(`Serve the backup point's disks, create one overlay per disk and start the
VM (QEMU, daemonized, console in the session directory). The command then
keeps serving the disks until the session is committed or discarded (or
it is interrupted: the VM then waits for `+"`coffer instant serve`"+`). It holds a
lease on the repository for as long as it serves, so garbage collection
keeps the point's data.

A point of a libvirt domain runs as a new domain of its connection (or
--connection): the recorded definition with a new name (--name, default
VM-instant), UUID and MAC addresses, its disks qcow2 overlays in the
storage pool of the recorded disks (or --datastore) backed by coffer's
NBD export.

A point of a vSphere VM runs on an ESXi host of its connection (or
--connection): coffer serves the point's disks as flat VMDK files on an
NFSv3 export (--nfs-listen, default :2049, the port ESXi mounts; writes
go to overlays in the session directory), mounts it on the host (--host,
default the first connected one) as datastore coffer-instant-ID from
--nfs-address (default: --nfs-listen's address), registers the VM there
(--name, default VM-instant) and powers it on. The export has no
authentication: serve it only where the ESXi hosts are its only clients.`,
			`The session's ID, VM, monitor and console, and how to end it.
`+sessionOutput+` (printed once the VM runs).`,
			`coffer instant start latest
coffer instant start 3fa2c1d0 --reconnect-delay 2m --json
coffer instant start web-1 --connection kvm2 --name web-1-dr
coffer instant start app-01 --host esx-02 --nfs-address 10.0.0.5`,
			`0 when it stops serving: the session was committed or discarded, or the
command was stopped (the VM then waits for `+"`coffer instant serve`"+`); 7 for
an unknown point.`),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			began := time.Now()
			in := &api.InstantStartInput{PointParam: api.PointParam{Point: args[0]}, Body: api.InstantStartRequest{
				ReconnectDelaySeconds: delay.Seconds(), Connection: conn, Name: name, Datastore: datastore,
				Host: host, NFSListen: nfsListen, NFSAddress: nfsAddress}}
			// The disks are served from this process until it stops: the
			// service's method, not an operation answered and done.
			srv, err := command.Call(a.App, func(s *service.Service) (*restoreops.Serving[api.InstantSession], error) {
				return restoreops.Ops{Service: s}.InstantStart(cmd.Context(), in)
			})
			if err != nil {
				return err
			}
			s := srv.Doc
			if err := a.Emit(s, nil, func() {
				a.Printf("session %s: VM %s running from backup point %s (started in %.1fs)\n", s.ID, s.VM, command.Short(s.PointID), time.Since(began).Seconds())
				if s.Platform == "vsphere" {
					a.Printf("  vSphere VM %s (%s) of connection %s, on datastore %s mounted from %s\n", s.Domain, s.DomainID, s.Connection, s.Datastore, s.NFSAddress)
				} else if s.Domain != "" {
					a.Printf("  libvirt domain %s (%s) of connection %s\n", s.Domain, s.DomainID, s.Connection)
				} else {
					a.Printf("  monitor %s\n  console %s\n", s.QMPSocket, s.Console)
				}
				a.Printf("serving its disks until `coffer instant commit %s --to DIR` or `coffer instant discard %s`\n", s.ID, s.ID)
			}); err != nil {
				return err
			}
			return srv.Wait()
		},
	}
	cmd.Flags().DurationVar(&delay, "reconnect-delay", 30*time.Second, "how long the VM's reads wait for a lost server before the VM pauses")
	cmd.Flags().StringVar(&conn, "connection", "", "libvirt and vSphere points: the connection to run the VM on (default: the one the point was taken through)")
	cmd.Flags().StringVar(&name, "name", "", "libvirt and vSphere points: the new VM's name (default: VM-instant)")
	cmd.Flags().StringVar(&host, "host", "", "vSphere points: the ESXi host to run the VM on (default: the first connected one)")
	cmd.Flags().StringVar(&nfsListen, "nfs-listen", "", "vSphere points: where the NFS export listens, HOST:PORT (default :2049)")
	cmd.Flags().StringVar(&nfsAddress, "nfs-address", "", "vSphere points: the address the ESXi host mounts the export from (default: --nfs-listen's)")
	cmd.Flags().StringVar(&datastore, "datastore", "", "libvirt points: the storage pool for the overlays (default: the recorded disks')")
	return command.Op(cmd, "instant-start")
}

func (a *app) cmdInstantServe() *cobra.Command {
	return command.Op(&cobra.Command{
		Use:   "serve ID",
		Short: "serve a session's disks again after its server died, and resume the VM",
		Long: command.Manual(`Serve an instant recovery session's disks again after the process that
served them died (its VM's reads wait, then the VM pauses), and resume the
VM. Like `+"`instant start`"+`, it serves until the session is committed or
discarded, or it is interrupted. A libvirt domain's session is refused:
libvirt 9.0 gives QEMU's NBD client no reconnect delay, so the domain
cannot read from a server started again (discard it).`,
			`"session ID: serving again", and whether the VM was resumed. `+sessionOutput,
			`coffer instant serve 3fa2c1d0`,
			"0 when it stops serving; 7 for an unknown session; 1 when another process serves it."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			srv, err := command.Call(a.App, func(s *service.Service) (*restoreops.Serving[restoreops.InstantServed], error) {
				// Served from this process, as instant start serves.
				return restoreops.Ops{Service: s}.InstantServe(cmd.Context(), &api.InstantServeInput{SessionParam: api.SessionParam{Session: args[0]}})
			})
			if err != nil {
				return err
			}
			s := srv.Doc.Session
			if err := a.Emit(s, nil, func() {
				a.Printf("session %s: serving again", s.ID)
				if srv.Doc.Resumed {
					a.Printf("; VM %s resumed", s.VM)
				}
				a.Printf("\n")
			}); err != nil {
				return err
			}
			return srv.Wait()
		},
	}, "instant-serve")
}

func (a *app) cmdInstantList() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "list",
		Short: "list instant recovery sessions and their state",
		Long: command.Manual(`List the instant recovery sessions of the state directory: which VM runs
from which point, whether it still runs from the backup (running), is
being mirrored (committing) or runs from production storage (committed),
and whether its VM and its server are alive.`,
			`A table: ID, VM, STATE, VM RUNNING, SERVER, STARTED, TARGETS. --json: a
list of session documents ([] without sessions).`,
			`coffer instant list
coffer instant list --json | jq '.[] | select(.server_running | not) | .id'`,
			"0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := command.RunOp[[]api.InstantSession](cmd.Context(), a.App, "instant-list", &api.InstantListInput{})
			if err != nil {
				return err
			}
			return a.Emit(docs, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tVM\tSTATE\tVM RUNNING\tSERVER\tSTARTED\tTARGETS")
				for _, d := range docs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%s\t%s\n", d.ID, d.VM, d.State, command.YesNo(d.VMRunning), command.YesNo(d.ServerRunning),
						d.Started.Local().Format(time.DateTime), strings.Join(d.Targets, " "))
				}
				_ = tw.Flush()
			})
		},
	}, "instant-list"))
}

func (a *app) cmdInstantCommit() *cobra.Command {
	var in api.InstantCommitInput
	cmd := &cobra.Command{
		Use:   "commit ID --to DIR",
		Short: "move the running VM onto production storage and stop serving its backup",
		Long: command.Manual(`Move a VM running from its backup onto production storage while it runs:
every disk (its overlay plus what it still reads from the backup) is
mirrored to DIR/KEY.FORMAT, then the VM switches to the new files in one
step, coffer stops serving the backup and the overlays are removed. On
failure the VM keeps running from the backup and the session stays as it
was.

A libvirt domain is copied by libvirt's block copy, disk by disk, to
NAME-KEY.FORMAT in --to, a storage pool's name or a directory of the
libvirt host, and pivoted to the copy once it mirrors the disk; its
definition then names the copies.

A vSphere VM is moved with Storage vMotion (RelocateVM_Task) to the
datastore --to names; once it no longer uses coffer's datastore, that
datastore is unmounted, coffer stops serving the export and the export's
files and overlays are removed.`,
			`"session ID: VM NAME now runs from FILES". `+sessionOutput,
			`coffer instant commit 3fa2c1d0 --to /var/lib/images/web-1
coffer instant commit 3fa2c1d0 --to /srv/vm --format raw
coffer instant commit 3fa2c1d0 --to images    # a libvirt domain, into pool images
coffer instant commit 3fa2c1d0 --to ds-prod   # a vSphere VM, onto datastore ds-prod`,
			"0; 7 for an unknown session; 1 when the VM no longer runs (discard the session)."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Session = args[0]
			began := time.Now()
			// Through a server, --to is a path under its restore directory.
			s, err := command.RunOp[*api.InstantSession](cmd.Context(), a.App, "instant-commit", &in)
			if err != nil {
				return err
			}
			return a.Emit(s, nil, func() {
				a.Printf("session %s: VM %s now runs from %s (moved in %.1fs); the backup is no longer read\n",
					s.ID, s.VM, strings.Join(s.Targets, ", "), time.Since(began).Seconds())
			})
		},
	}
	cmd.Flags().StringVar(&in.Body.To, "to", "", "directory for the VM's disks on production storage, a libvirt storage pool, or a vSphere datastore (required)")
	cmd.Flags().StringVar(&in.Body.Format, "format", "qcow2", "disk format: raw or qcow2")
	_ = cmd.MarkFlagRequired("to")
	return command.RemoteToo(command.Op(cmd, "instant-commit"))
}

func (a *app) cmdInstantDiscard() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "discard ID",
		Short: "stop a VM running from its backup and delete what it wrote (a committed VM is left running)",
		Long: command.Manual(`End an instant recovery session. A VM still running from the backup is
stopped and its overlays (everything it wrote) are deleted; a committed VM
runs from production storage and is left alone: only the session record
goes. The process serving the session stops. A vSphere VM still running
from coffer's export is powered off and unregistered, and the export's
datastore unmounted, before the export is removed.`,
			`"session ID discarded". `+sessionOutput,
			`coffer instant discard 3fa2c1d0`,
			"0; 7 for an unknown session."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := command.RunOp[*api.InstantSession](cmd.Context(), a.App, "instant-discard",
				&api.InstantDiscardInput{SessionParam: api.SessionParam{Session: args[0]}})
			if err != nil {
				return err
			}
			return a.Emit(s, nil, func() { a.Printf("session %s discarded\n", s.ID) })
		},
	}, "instant-discard"))
}

func (a *app) cmdInstantExport() *cobra.Command {
	var listen string
	export := &cobra.Command{
		Use:   "export BACKUP [--listen unix:PATH|tcp:HOST:PORT]",
		Short: "serve every disk of a backup point, read-only, straight from the repository",
		Long: command.Manual(`Serve the disks of a backup point as NBD exports (fixed newstyle, structured
replies, base:allocation), read on demand from the repository through a
bounded chunk cache. Export names are the disk keys ("vda"). Any NBD
client can read them (qemu-img, nbdinfo, nbd-client); a VM on another
host boots from them with a local copy-on-write overlay:

  -blockdev driver=nbd,node-name=nbd0,server.type=unix,server.path=PATH,export=vda,read-only=on,reconnect-delay=10
  -blockdev driver=qcow2,node-name=vda,file.driver=file,file.filename=overlay.qcow2,backing=nbd0

Runs until interrupted, holding a lease on the repository.`,
			`"serving N disk(s) of snapshot ID on ADDRESS (exports: ...)". --json:
{point_id, listen, exports}.`,
			`coffer instant export latest
coffer instant export 3fa2c1d0 --listen unix:/run/coffer/web.nbd`,
			"0 when stopped; 2 for a bad --listen; 7 for an unknown point."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Served from this process until it is stopped (a server's
			// export lasts a request's duration_seconds instead).
			in := &api.InstantExportInput{PointParam: api.PointParam{Point: args[0]}, Body: api.ExportRequest{Listen: listen}}
			srv, err := command.Call(a.App, func(s *service.Service) (*restoreops.Serving[api.Export], error) {
				return restoreops.Ops{Service: s}.InstantExport(cmd.Context(), in)
			})
			if err != nil {
				return err
			}
			d := srv.Doc
			if err := a.Emit(d, nil, func() {
				a.Printf("serving %d disk(s) of backup point %s on %s (exports: %s)\n", len(d.Exports), command.Short(d.PointID), d.Listen, strings.Join(d.Exports, ", "))
			}); err != nil {
				return err
			}
			return srv.Wait()
		},
	}
	export.Flags().StringVar(&listen, "listen", "tcp:127.0.0.1:10809", "where to listen: unix:PATH or tcp:HOST:PORT")
	return command.Op(export, "instant-export")
}

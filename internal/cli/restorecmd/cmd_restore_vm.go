package restorecmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdRestoreVM() *cobra.Command {
	var in api.RestoreVMInput
	cmd := &cobra.Command{
		Use:   "vm BACKUP (--to DIR | --connection NAME) [--name NAME] [--start]",
		Short: "restore a backup point as a new VM: its disks and its recorded configuration",
		Long: command.Manual(`QEMU/KVM (--to DIR): restore every disk of a QEMU backup point into DIR and reproduce the VM from
the command line recorded at backup time: same machine, CPUs, memory,
devices and kernel; new name (default NAME-restored), new UUID, new MAC
addresses (so it can share a network with the original), its own monitor
socket and console log in DIR. DIR/launch.sh starts it; --start starts it
now (daemonized). The original VM and its files are never touched, and
existing files in DIR are never overwritten.

A point taken with --snapshot-mode with-memory also holds the VM's RAM and
device state: --start then resumes the guest where it was at the backup
instant instead of booting it (--cold-boot boots it instead).

vSphere (--connection NAME, a connection of the configuration file): create
a new VM (default name NAME-restored) from the configuration recorded at
backup time (CPUs, memory, disks, networks) on the same vCenter or ESXi,
its disks on the recorded datastores (or --datastore), powered off unless
--start, and upload every disk's data into it straight from the repository.
A name already in use is refused. --onto-original instead writes the
backup back onto the original VM's disks; it needs
--yes-overwrite-original, and the VM powered off and without snapshots: a
running VM is never written. A VM this command created is deleted again if
the restore fails.

With a data-mover VM (options.data-mover-vm), each disk is attached to it
and written in ranges: only the point's allocated data is sent (a thin
disk stays thin), the VM's disks at once, several streams each, within
limits.per-datastore. The pieces written are journalled; a write that
breaks on the device resumes from the journal within the default retry
policy, and when it still fails, or coffer was killed, the half-restored
VM stays: the same command with --resume finishes it, sending only what
was not written.

libvirt (--connection NAME of kind libvirt): define a new domain from the
recorded XML (new name, UUID and MACs) with its disks as new qcow2 or raw
files in a storage pool (--datastore POOL, --format), or, with
--onto-original --yes-overwrite-original, replace the shut-off original
domain's disk files (written beside them, renamed into place when all are
written; coffer's checkpoints are dropped, so the next backup is full).

Through a server (--server), --to is a directory relative to its restore
directory (server.restore-dir), and --connection names a connection of its
configuration.

Onto another platform (--connection NAME of another kind than the point's
VM): a vSphere point becomes a libvirt domain, a QEMU or libvirt point a
vSphere VM. coffer maps the VM's disk controllers, disks, network
adapters, firmware (BIOS or EFI), CPUs and memory onto the target's
virtual hardware, keeping a device where the target emulates the same one
(VMware Paravirtual SCSI, LSI Logic SAS and VMXNET3 under KVM) so the
guest's own drivers find its disks, and reports before it starts what it
mapped, what it cannot map (left out, or on a substitute), and what the
guest will need (virtio drivers for a Windows guest under KVM; vmw_pvscsi
and vmxnet3 in a Linux guest under vSphere). --dry-run prints the report
only; --network NAME puts every adapter on the target's network NAME. A
vSphere point also restores with --to DIR as a QEMU VM in DIR, mapped
the same way.`,
			`What was restored where, and how to start it or that it started. --json:
{point_id, vm, vm_id, original_vm, connection, onto_original, disks,
started, dir, launch_script, qmp_socket, console, pid, memory_state,
resumed_from_memory, warnings, mapping: {from, to, mapped, unmapped,
needs}, dry_run}.`,
			`coffer restore vm latest --to /var/lib/images/web-1-copy --start
coffer restore vm 3fa2c1d0 --connection vc1 --name web-1-test --datastore ds2
coffer restore vm latest --connection vc1 --onto-original --yes-overwrite-original
coffer restore vm 3fa2c1d0 --connection vc1 --name web-1-test --resume
coffer restore vm web-vs --connection kvm1 --datastore images --dry-run
coffer restore vm web-1 --connection vc1 --network "VM Network"`,
			`0; 2 for a point without a recorded VM configuration, a VM name in use, or
--onto-original without its confirmation; 7 for an unknown point.`),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Point = args[0]
			res, err := command.RunOp[*api.RestoredVM](cmd.Context(), a.App, "restore-vm", &in)
			if err != nil {
				return err
			}
			return a.Emit(res, nil, func() { a.printRestoredVM(res) })
		},
	}
	restoreVMFlags(cmd, &in)
	command.WorkerFlag(cmd.Flags(), &in.WorkerParam)
	return command.RemoteToo(command.Op(cmd, "restore-vm"))
}

func restoreVMFlags(cmd *cobra.Command, in *api.RestoreVMInput) {
	f, b := cmd.Flags(), &in.Body
	f.StringVar(&b.Dir, "to", "", "directory for the new VM's disks, sockets and launch script (required)")
	f.StringVar(&b.Name, "name", "", "the new VM's name (default: the original's name + \"-restored\")")
	f.StringVar(&b.Format, "format", "qcow2", "disk format: raw (sparse) or qcow2")
	f.BoolVar(&b.Start, "start", false, "start the new VM")
	f.BoolVar(&b.ColdBoot, "cold-boot", false, "boot the VM even when the point holds its memory state")
	f.StringVar(&in.Connection, "connection", "", "restore through this hypervisor connection of the configuration (vSphere, libvirt)")
	f.StringVar(&b.Datastore, "datastore", "", "with --connection: datastore (libvirt: storage pool) for the new VM's files (default: as recorded)")
	f.BoolVar(&b.OntoOriginal, "onto-original", false, "with --connection: write the backup onto the original VM's disks instead of a new VM")
	f.BoolVar(&b.ConfirmOverwrite, "yes-overwrite-original", false, "confirm --onto-original")
	f.BoolVar(&b.Resume, "resume", false, "vSphere: finish a broken restore of this point into the VM --name names")
	f.BoolVar(&b.DryRun, "dry-run", false, "onto another platform: print how the VM maps onto the connection's, restore nothing")
	f.StringVar(&b.Network, "network", "", "onto another platform: the target's network for every adapter (default: the recorded names)")
}

// printRestoredVM says what was restored where, and how to start it.
func (a *app) printRestoredVM(res *api.RestoredVM) {
	if res.Mapping != nil {
		a.printMapping(res.Mapping)
	}
	if res.DryRun {
		return
	}
	for _, w := range res.Warnings {
		a.Printf("warning: %s\n", w)
	}
	if res.Connection != "" {
		what := "restored VM " + res.VM
		if res.OntoOriginal {
			what = "restored the disks of VM " + res.VM
		}
		a.Printf("%s on %s (from %s, snapshot %s): %d disk(s)", what, res.Connection, res.OriginalVM, command.Short(res.PointID), len(res.Disks))
		if res.Started {
			a.Printf(", powered on")
		}
		a.Printf("\n")
		return
	}
	a.Printf("restored VM %s (from %s, snapshot %s) into %s: %d disk(s)\n", res.VM, res.OriginalVM, command.Short(res.PointID), res.Dir, len(res.Disks))
	if res.Started {
		how := "booted"
		if res.ResumedFromMemory {
			how = "resumed from its memory state"
		}
		a.Printf("started (%s): pid %d, monitor %s, console %s\n", how, res.PID, res.QMPSocket, res.Console)
	} else {
		a.Printf("start it with %s\n", res.LaunchScript)
	}
}

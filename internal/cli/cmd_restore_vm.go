package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/restore/qcow2"
)

type restoreVMOptions struct {
	to, name, format string
	start, coldBoot  bool
	// On a hypervisor connection instead of into a directory:
	connection, datastore          string
	ontoOriginal, confirmOverwrite bool
}

type restoreVMResult struct {
	Snapshot string   `json:"snapshot"`
	VM       string   `json:"vm"`
	UUID     string   `json:"uuid"`
	Dir      string   `json:"dir"`
	Disks    []string `json:"disks"`
	Launch   string   `json:"launch_script"`
	Started  bool     `json:"started"`
	Memory   string   `json:"memory_state,omitempty"`
	Resumed  bool     `json:"resumed_from_memory"`
	PID      int      `json:"pid,omitempty"`
	QMP      string   `json:"qmp_socket"`
	Console  string   `json:"console"`
}

func (a *app) cmdRestoreVM() *cobra.Command {
	var o restoreVMOptions
	cmd := &cobra.Command{
		Use:   "vm BACKUP (--to DIR | --connection NAME) [--name NAME] [--start]",
		Short: "restore a backup point as a new VM: its disks and its recorded configuration",
		Long: `QEMU/KVM (--to DIR): restore every disk of a QEMU backup point into DIR and reproduce the VM from
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
the restore fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runRestoreVM(cmd.Context(), args[0], o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.to, "to", "", "directory for the new VM's disks, sockets and launch script (required)")
	f.StringVar(&o.name, "name", "", "the new VM's name (default: the original's name + \"-restored\")")
	f.StringVar(&o.format, "format", "qcow2", "disk format: raw (sparse) or qcow2")
	f.BoolVar(&o.start, "start", false, "start the new VM")
	f.BoolVar(&o.coldBoot, "cold-boot", false, "boot the VM even when the point holds its memory state")
	f.StringVar(&o.connection, "connection", "", "restore through this hypervisor connection of the configuration (vSphere)")
	f.StringVar(&o.datastore, "datastore", "", "with --connection: datastore for the new VM's files (default: as recorded)")
	f.BoolVar(&o.ontoOriginal, "onto-original", false, "with --connection: write the backup onto the original VM's disks instead of a new VM")
	f.BoolVar(&o.confirmOverwrite, "yes-overwrite-original", false, "confirm --onto-original")
	return cmd
}

func (a *app) runRestoreVM(ctx context.Context, ref string, o restoreVMOptions) error {
	if o.format != "raw" && o.format != "qcow2" {
		return usagef("--format must be raw or qcow2, not %q", o.format)
	}
	r, s, release, err := a.openPoint(ctx, ref, "restore vm "+ref)
	if err != nil {
		return err
	}
	defer release()
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(s.VMConfig, &cfg); err != nil || cfg.Kind == "" {
		return usagef("backup point %s has no recorded VM configuration: restore its disks with `coffer restore`", s.ID.Short())
	}
	if o.connection != "" {
		return a.runRestoreVMOnConnection(ctx, r, s, cfg, o)
	}
	if cfg.Kind != "qemu" {
		return usagef("backup point %s is of a %s VM: restore it with --connection NAME", s.ID.Short(), cfg.Kind)
	}
	if o.to == "" {
		return usagef("a QEMU VM is restored into a directory: --to DIR")
	}
	if err := qemu.Relaunchable(cfg.Native); err != nil {
		return usagef("backup point %s: %v", s.ID.Short(), err)
	}
	dir, err := filepath.Abs(o.to)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	name := o.name
	if name == "" {
		name = cfg.Name + "-restored"
	}
	spec := qemu.LaunchSpec{Dir: dir, Name: name, UUID: newUUID(), Disks: map[string]qemu.LaunchDisk{}, NewMAC: newMAC}
	res := restoreVMResult{Snapshot: s.ID.String(), VM: name, UUID: spec.UUID, Dir: dir, QMP: spec.QMPPath(), Console: spec.ConsolePath()}
	for _, d := range s.Disks {
		if d.Kind == hypervisor.KindMemory {
			res.Memory = filepath.Join(dir, "memory.vmstate")
			if _, err := restore.ToFile(ctx, r, s, d, res.Memory, restore.FileOptions{}); err != nil {
				return fmt.Errorf("memory state: %w", err)
			}
			continue
		}
		path := filepath.Join(dir, d.Key+"."+o.format)
		if err := a.restoreDiskAs(ctx, r, s, d, path, o.format); err != nil {
			return fmt.Errorf("disk %s: %w", d.Key, err)
		}
		spec.Disks[d.Key] = qemu.LaunchDisk{Path: path, Format: o.format}
		res.Disks = append(res.Disks, path)
	}
	spec.Incoming = o.start && res.Memory != "" && !o.coldBoot
	rl, err := qemu.RelaunchArgs(cfg.Native, spec)
	if err != nil {
		return err
	}
	res.Launch = filepath.Join(dir, "launch.sh")
	script := rl
	if spec.Incoming { // the script boots; resuming from memory is this command's job
		cold := spec
		cold.Incoming = false
		if script, err = qemu.RelaunchArgs(cfg.Native, cold); err != nil {
			return err
		}
	}
	if err := writeLaunchScript(res.Launch, script.Args); err != nil {
		return err
	}
	if o.start {
		if res.PID, err = qemu.Launch(ctx, rl.Args, spec); err != nil {
			return err
		}
		res.Started = true
		if spec.Incoming {
			if err := qemu.LoadMemory(ctx, spec.QMPPath(), res.Memory); err != nil {
				return err
			}
			res.Resumed = true
		}
	}
	if a.jsonOut {
		return a.printJSON(res)
	}
	a.printf("restored VM %s (from %s, snapshot %s) into %s: %d disk(s)\n", name, cfg.Name, s.ID.Short(), dir, len(res.Disks))
	if res.Started {
		how := "booted"
		if res.Resumed {
			how = "resumed from its memory state"
		}
		a.printf("started (%s): pid %d, monitor %s, console %s\n", how, res.PID, res.QMP, res.Console)
	} else {
		a.printf("start it with %s\n", res.Launch)
	}
	return nil
}

// restoreDiskAs restores one disk in the given format.
func (a *app) restoreDiskAs(ctx context.Context, r *repo.Repository, s *repo.Snapshot, d repo.Disk, path, format string) error {
	if format == "qcow2" {
		return qcow2.Write(ctx, r, d, path, a.log)
	}
	_, err := restore.ToFile(ctx, r, s, d, path, restore.FileOptions{})
	return err
}

// writeLaunchScript records the command line that starts the restored VM.
func writeLaunchScript(path string, args []string) error {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Starts the VM restored by coffer (daemonized; see qemu.pid, console.log, qmp.sock).\nexec")
	for _, a := range args {
		b.WriteString(" '" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	b.WriteString("\n")
	return os.WriteFile(path, []byte(b.String()), 0o755)
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// newMAC returns a random locally administered unicast MAC address.
func newMAC() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	b[0] = b[0]&0xfc | 0x02
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

package qemu

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// DirRestorer is QEMU's hypervisor.Restorer: it restores a VM into a
// directory of this host (NewVMOptions.TargetDir). The disks become
// files there, and the command line recorded at backup time, rewritten
// for them with a new name, UUID and MAC addresses, the script that
// starts the VM. It needs no monitor, so `restore vm --to DIR` uses it
// without a connection.
type DirRestorer struct{}

// RestoredFiles says where a VM restored into a directory is.
type RestoredFiles struct {
	Dir, QMPSocket, Console, LaunchScript string
	// Disks are the disks' files, in the order they were written.
	Disks []string
	// MemoryState is the memory state file ("" for a point without one).
	MemoryState string
	// PID is the started VM's process; ResumedFromMemory says it resumed
	// from MemoryState instead of booting.
	PID               int
	ResumedFromMemory bool
	// Warnings say what of the original could not be kept.
	Warnings []string
}

// CreateVM prepares the directory of a new VM from cfg (its recorded
// command line must be relaunchable: Relaunchable).
func (DirRestorer) CreateVM(_ context.Context, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	if o.TargetDir == "" {
		return nil, fmt.Errorf("qemu: a VM is restored into a directory, and none was given")
	}
	if o.DiskFormat != "raw" && o.DiskFormat != "qcow2" {
		return nil, fmt.Errorf("qemu: disk format %q: qcow2 or raw", o.DiskFormat)
	}
	dir, err := filepath.Abs(o.TargetDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	spec := LaunchSpec{Dir: dir, Name: o.Name, UUID: newUUID(), Disks: map[string]LaunchDisk{}, NewMAC: newMAC}
	return &dirVM{native: cfg.Native, format: o.DiskFormat, coldBoot: o.ColdBoot, spec: spec,
		files: RestoredFiles{Dir: dir, QMPSocket: spec.QMPPath(), Console: spec.ConsolePath(), Disks: []string{}, Warnings: []string{}}}, nil
}

// dirVM is a VM being restored into a directory.
type dirVM struct {
	native   []byte
	format   string
	coldBoot bool
	spec     LaunchSpec
	files    RestoredFiles
	// bootArgs is the command line of the launch script (Complete), which
	// a VM that boots is started with, so both give it the same MACs.
	bootArgs []string
}

// Ref implements hypervisor.NewVM.
func (v *dirVM) Ref() hypervisor.VMRef { return hypervisor.VMRef{ID: v.spec.UUID, Name: v.spec.Name} }

// Files says where the VM's files are.
func (v *dirVM) Files() RestoredFiles { return v.files }

// DiskPath is the file disk key is restored to.
func (v *dirVM) DiskPath(key string) string { return filepath.Join(v.spec.Dir, key+"."+v.format) }

// WriteDisk restores a disk into its file; src must be a
// hypervisor.FileSource.
func (v *dirVM) WriteDisk(ctx context.Context, key string, src hypervisor.DiskSource) error {
	fs, ok := src.(hypervisor.FileSource)
	if !ok {
		return fmt.Errorf("qemu: disk %s: a VM restored into a directory writes its disks as files, and the restore offers none", key)
	}
	path := v.DiskPath(key)
	if err := fs.WriteFile(ctx, path, v.format); err != nil {
		return err
	}
	v.spec.Disks[key] = LaunchDisk{Path: path, Format: v.format}
	v.files.Disks = append(v.files.Disks, path)
	return nil
}

// WriteMemory restores the memory state the VM resumes from when started
// (unless ColdBoot).
func (v *dirVM) WriteMemory(ctx context.Context, src hypervisor.DiskSource) error {
	fs, ok := src.(hypervisor.FileSource)
	if !ok {
		return fmt.Errorf("qemu: a VM restored into a directory writes its memory state as a file, and the restore offers none")
	}
	path := filepath.Join(v.spec.Dir, "memory.vmstate")
	if err := fs.WriteFile(ctx, path, "raw"); err != nil {
		return err
	}
	v.files.MemoryState = path
	return nil
}

// Complete writes the script that starts the VM: it boots (resuming from
// the memory state is Start's job).
func (v *dirVM) Complete(context.Context) error {
	rl, err := RelaunchArgs(v.native, v.spec)
	if err != nil {
		return err
	}
	v.files.Warnings = append(v.files.Warnings, rl.Warnings...)
	v.files.LaunchScript = filepath.Join(v.spec.Dir, "launch.sh")
	v.bootArgs = rl.Args
	return writeLaunchScript(v.files.LaunchScript, rl.Args)
}

// Start starts the VM; one restored with its memory state resumes from
// it unless ColdBoot.
func (v *dirVM) Start(ctx context.Context) error {
	spec := v.spec
	spec.Incoming = v.files.MemoryState != "" && !v.coldBoot
	args := v.bootArgs
	if spec.Incoming || args == nil {
		rl, err := RelaunchArgs(v.native, spec)
		if err != nil {
			return err
		}
		args = rl.Args
	}
	var err error
	if v.files.PID, err = Launch(ctx, args, spec); err != nil {
		return err
	}
	if spec.Incoming {
		if err := LoadMemory(ctx, spec.QMPPath(), v.files.MemoryState); err != nil {
			return err
		}
		v.files.ResumedFromMemory = true
	}
	return nil
}

// Abort leaves the directory as it is: a disk's file appears only once
// complete, and removing what a failed restore wrote could remove what
// was there before.
func (v *dirVM) Abort(context.Context) error { return nil }

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

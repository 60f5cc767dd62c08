package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vmware/govmomi/guest"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// guestPoll is how often a running guest command is asked whether it
// ended: VMware Tools has no wait call, only the process list.
var guestPoll = 250 * time.Millisecond

// GuestRun runs a command in the VM through VMware Tools guest operations
// (StartProgramInGuest, then ListProcessesInGuest until it ended), for
// application hooks around a snapshot (backup.GuestRunner). It logs in
// to the guest as the connection's guest-user. Tools returns no output:
// the evidence is the exit code. A command still running when ctx ends
// is terminated (TerminateProcessInGuest).
func (c *Connector) GuestRun(ctx context.Context, ref hypervisor.VMRef, argv []string) (string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", errors.New("vsphere: no program to run in the guest")
	}
	if c.cfg.GuestUser == "" {
		return "", errors.New("vsphere: guest hooks need the guest account VMware Tools runs them as: set guest-user and guest-password-file on the connection")
	}
	ref, err := c.resolve(ctx, ref)
	if err != nil {
		return "", err
	}
	moref := types.ManagedObjectReference{Type: "VirtualMachine", Value: ref.ID}
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, moref, []string{"runtime.powerState", "guest.toolsRunningStatus", "guest.guestFamily"}, &vm); err != nil {
		return "", fmt.Errorf("vsphere: VM %s: %w", ref.Name, err)
	}
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		return "", fmt.Errorf("vsphere: %s is %s: guest commands need a running guest", ref.Name, vm.Runtime.PowerState)
	}
	if vm.Guest == nil || vm.Guest.ToolsRunningStatus != string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) {
		return "", fmt.Errorf("vsphere: VMware Tools is not running in %s: guest commands need it", ref.Name)
	}
	pm, err := guest.NewOperationsManager(c.client, moref).ProcessManager(ctx)
	if err != nil {
		return "", fmt.Errorf("vsphere: guest operations of %s: %w", ref.Name, err)
	}
	auth := &types.NamePasswordAuthentication{Username: c.cfg.GuestUser, Password: c.cfg.GuestPassword}
	windows := vm.Guest.GuestFamily == string(types.VirtualMachineGuestOsFamilyWindowsGuest)
	pid, err := pm.StartProgram(ctx, auth, &types.GuestProgramSpec{ProgramPath: argv[0], Arguments: guestArgs(argv[1:], windows)})
	if err != nil {
		return "", fmt.Errorf("vsphere: start %s in %s: %w", argv[0], ref.Name, guestFault(err, c.cfg.GuestUser))
	}
	tick := time.NewTicker(guestPoll)
	defer tick.Stop()
	for {
		procs, err := pm.ListProcesses(ctx, auth, []int64{pid})
		switch {
		case err != nil && ctx.Err() == nil:
			return "", fmt.Errorf("vsphere: %s in %s (pid %d): %w", argv[0], ref.Name, pid, guestFault(err, c.cfg.GuestUser))
		case err == nil && len(procs) == 1 && procs[0].EndTime != nil:
			if code := procs[0].ExitCode; code != 0 {
				return "", fmt.Errorf("vsphere: %s in %s exited with status %d", argv[0], ref.Name, code)
			}
			return fmt.Sprintf("%s exited 0 in %s (pid %d)", argv[0], ref.Name, pid), nil
		}
		select {
		case <-ctx.Done():
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			terr := pm.TerminateProcess(tctx, auth, pid)
			cancel()
			if terr != nil {
				return "", fmt.Errorf("vsphere: %s in %s (pid %d) did not finish, and terminating it failed (%v): %w", argv[0], ref.Name, pid, terr, ctx.Err())
			}
			return "", fmt.Errorf("vsphere: %s in %s (pid %d) did not finish; terminated: %w", argv[0], ref.Name, pid, ctx.Err())
		case <-tick.C:
		}
	}
}

// guestArgs joins arguments into the one command line string Tools takes:
// quoted for the POSIX shell VMware Tools runs programs through on Linux,
// or for the Windows command line.
func guestArgs(args []string, windows bool) string {
	q := make([]string, len(args))
	for i, a := range args {
		if windows {
			q[i] = `"` + strings.ReplaceAll(a, `"`, `\"`) + `"`
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// guestFault says what a guest operation's fault means for the operator.
func guestFault(err error, user string) error {
	if !soap.IsSoapFault(err) {
		return err
	}
	switch soap.ToSoapFault(err).VimFault().(type) {
	case types.InvalidGuestLogin, *types.InvalidGuestLogin:
		return fmt.Errorf("the guest refused the login of %s (check guest-user and guest-password-file): %w", user, err)
	case types.GuestOperationsUnavailable, *types.GuestOperationsUnavailable:
		return fmt.Errorf("guest operations are not available (VMware Tools starting, or too old): %w", err)
	case types.GuestPermissionDenied, *types.GuestPermissionDenied:
		return fmt.Errorf("%s may not run this program in the guest: %w", user, err)
	case types.FileNotFound, *types.FileNotFound:
		return fmt.Errorf("no such program in the guest: %w", err)
	}
	return err
}

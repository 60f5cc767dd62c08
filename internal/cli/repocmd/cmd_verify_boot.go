package repocmd

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdVerifyBoot() *cobra.Command {
	var in api.VerifyBootInput
	var timeout, probeTimeout time.Duration
	var screenshot string
	cmd := &cobra.Command{
		Use:   "boot POINT|VM|latest",
		Short: "boot a backup point isolated and check that it comes up",
		Long: command.Manual(`Prove that a QEMU or vSphere backup point boots. Its VM starts under QEMU
from the repository the way instant recovery starts it (disks served over
NBD, a throw-away overlay taking every write), under a new name, with no
network (or a user-mode network restricted to the forwarded probe ports on
127.0.0.1), and goes through a ladder of checks, each with its result,
time and evidence:

  1 vm-starts       QEMU starts the VM
  2 no-panic        no guest panic (pvpanic's GUEST_PANICKED), no boot loop
                    (repeated resets), no shutdown
  3 console-marker  the serial console shows --marker (default login:)
  4 guest-agent     the guest agent answers guest-ping (skipped when the
                    VM has no agent channel)
  5 probes          every --probe passes: tcp:PORT, http:PORT/PATH=STATUS,
                    exec:COMMAND ARGS (through the guest agent, exit 0)
  6 screenshot      a screendump that is not a single colour

A failed step skips the ones after it, except the screenshot, which is
taken whenever QEMU still runs. --timeout bounds the whole ladder.

A vSphere point starts from its recorded virtual hardware: each disk on the
controller QEMU emulates as VMware presents it (pvscsi, LSI Logic SAS,
SATA, IDE, NVMe), BIOS or EFI (OVMF), its CPUs and memory within the
host's, and its network adapter (vmxnet3, e1000, e1000e) only for tcp and
http probes; under TCG, with no guest agent (exec probes are refused). A
point whose guest needs what QEMU here cannot give it (an LSI Logic
Parallel or BusLogic controller, EFI without OVMF) is not booted: its
verdict is "cannot verify locally" with the reason.

Nothing is written to the repository's points or to the production VM;
the result is stored in the repository beside the point
(bootverify/<point ID>), so it survives the catalog and locked points,
and shows in the BOOT column of `+"`coffer snapshots`"+`; `+"`coffer verify boot show`"+`
prints it again with its evidence, `+"`coffer verify boot list`"+` lists them. QEMU, the overlay
and the export are removed at the end; a killed coffer's are removed by
the next verification. A task of kind verify-boot records the run.`,
			`The verdict, then one line per step (number, name, status, seconds,
detail) and its evidence. --json: {point_id, vm, started,
duration_seconds, passed, failed_step, cannot_verify_locally, steps:
[{number, name, status, duration_seconds, detail, evidence}],
screenshot_png (base64), screenshot_file, console_tail}.`,
			`coffer verify boot latest
coffer verify boot web-1 --probe http:80/=200 --probe tcp:22
coffer verify boot 3f2a9c01 --marker 'web-1 login:' --timeout 10m --screenshot web-1.png
coffer verify boot web-1 --probe 'exec:/usr/bin/systemctl is-active nginx' --json`,
			"0 when every step passed; 5 when a step failed (the output names it); 7 for\nan unknown point or VM; 2 for bad flags, and for a point that cannot be\nverified locally."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Point = args[0]
			in.Body.TimeoutSeconds, in.Body.ProbeTimeoutSeconds = timeout.Seconds(), probeTimeout.Seconds()
			if in.Body.Probes == nil {
				in.Body.Probes = []string{} // the API's probes is a list, never null
			}
			doc, err := command.RunOp[*api.BootVerification](cmd.Context(), a.App, "verify-boot", &in)
			if doc == nil {
				return err
			}
			if screenshot != "" && len(doc.ScreenshotPNG) > 0 {
				if werr := os.WriteFile(screenshot, doc.ScreenshotPNG, 0o644); werr != nil {
					return werr
				}
				doc.ScreenshotFile = screenshot
			}
			err = a.Emit(doc, err, func() { a.printBoot(doc) })
			if err != nil && doc.FailedStep > 0 && doc.CannotVerify == "" {
				// The report names the failed step and says what to do:
				// the repository's generic advice (verify --read-data)
				// does not fit a point that does not boot.
				return command.Reported{Err: err, Advised: true}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "bound on the whole ladder")
	f.StringVar(&in.Body.Marker, "marker", "login:", "regular expression the serial console must show (step 3)")
	f.StringArrayVar(&in.Body.Probes, "probe", nil, "an application check (step 5): tcp:PORT, http:PORT/PATH=STATUS, exec:COMMAND ARGS (repeatable)")
	f.DurationVar(&probeTimeout, "probe-timeout", 30*time.Second, "how long each probe is retried")
	f.StringVar(&screenshot, "screenshot", "", "write the screenshot (PNG) to this file")
	cmd.AddCommand(a.cmdVerifyBootShow(), a.cmdVerifyBootList())
	return command.RemoteToo(command.Op(cmd, "verify-boot"))
}

func (a *app) printBoot(d *api.BootVerification) {
	verdict := "boots: every step passed"
	switch {
	case d.CannotVerify != "":
		verdict = "CANNOT VERIFY LOCALLY: " + d.CannotVerify
	case !d.Passed:
		verdict = fmt.Sprintf("DOES NOT BOOT: step %d failed", d.FailedStep)
	}
	a.Printf("backup point %s of %s: %s (%.1fs)\n", command.Short(d.PointID), d.VM, verdict, d.DurationSeconds)
	for _, s := range d.Steps {
		a.Printf("  %d %-15s %-8s %5.1fs  %s\n", s.Number, s.Name, s.Status, s.DurationSeconds, s.Detail)
		keys := make([]string, 0, len(s.Evidence))
		for k := range s.Evidence {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			a.Printf("      %s: %s\n", k, s.Evidence[k])
		}
	}
	if d.ScreenshotFile != "" {
		a.Printf("screenshot: %s\n", d.ScreenshotFile)
	}
	if d.Review != "" {
		a.Printf("review: %s\n", d.Review)
	}
	if !d.Passed && d.CannotVerify == "" && d.FailedStep > 0 {
		a.Printf("next: look at the console tail and the screenshot (--screenshot FILE, or --json), mend the VM before its next backup, " +
			"and restore from a point that boots (`coffer snapshots` shows each point's BOOT verdict)\n")
	}
}

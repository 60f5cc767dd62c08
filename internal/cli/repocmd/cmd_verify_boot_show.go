package repocmd

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// The results of boot verifications, read back: the repository keeps the
// last one of each point (bootverify/<point ID>), and these print them
// without booting anything.

func (a *app) cmdVerifyBootShow() *cobra.Command {
	var in api.BootVerificationInput
	var screenshot string
	cmd := &cobra.Command{
		Use:   "show POINT|VM|latest",
		Short: "show a backup point's last boot verification: its ladder, evidence and screenshot",
		Long: command.Manual(`Show the boot verification the repository keeps for a backup point (its
last one), without booting anything: the verdict, each step of the ladder
with its result, time and evidence, the review note when the screen
changed much, and the serial console's tail. --screenshot writes the
screen at the end of the ladder to a PNG file. The point is named as `+"`coffer\nverify boot`"+` names it: an ID, a unique prefix, latest, or a VM's name (its
newest point). A VM named show or list is named by its point's ID here.`,
			`As `+"`coffer verify boot`"+` prints it, with the time it ran, then the console's
tail. --json: the same document as `+"`coffer verify boot --json`"+`.`,
			`coffer verify boot show web-1
coffer verify boot show 3f2a9c01 --screenshot web-1.png
coffer verify boot show latest --json | jq '.steps[] | select(.status == "failed")'`,
			"0 whatever the verdict; 7 for an unknown point, or one never verified."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Point = args[0]
			doc, err := command.RunOp[*api.BootVerification](cmd.Context(), a.App, "get-boot-verification", &in)
			if err != nil {
				return err
			}
			if screenshot != "" {
				if len(doc.ScreenshotPNG) == 0 {
					return fmt.Errorf("the boot verification of %s has no screenshot: QEMU gave no screen", command.Short(doc.PointID))
				}
				if err := os.WriteFile(screenshot, doc.ScreenshotPNG, 0o644); err != nil {
					return err
				}
				doc.ScreenshotFile = screenshot
			}
			return a.Emit(doc, nil, func() {
				a.Printf("verified %s\n", doc.Started.Local().Format("2006-01-02 15:04:05"))
				a.printBoot(doc)
				if tail := strings.TrimRight(doc.ConsoleTail, "\n"); tail != "" {
					a.Printf("console tail:\n")
					for _, line := range strings.Split(tail, "\n") {
						a.Printf("  | %s\n", line)
					}
				}
			})
		},
	}
	cmd.Flags().StringVar(&screenshot, "screenshot", "", "write the screenshot (PNG) to this file")
	return command.RemoteToo(command.Op(cmd, "get-boot-verification"))
}

func (a *app) cmdVerifyBootList() *cobra.Command {
	var in api.ListBootVerificationsInput
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list the boot verifications the repository keeps, newest first",
		Long: command.Manual(`List the boot verifications the repository keeps: the last verdict of each
verified backup point, newest first. --vm keeps one VM's. `+"`coffer verify boot\nshow`"+` prints one with its evidence.`,
			`A table: POINT, VM, VERIFIED, SECONDS, VERDICT (ok, failed@N step,
cannot verify, review). --json: a list of {point_id, vm, started,
duration_seconds, passed, failed_step, failed_step_name,
cannot_verify_locally, review, screenshot}.`,
			`coffer verify boot list
coffer verify boot list --vm web-1 --json`,
			"0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := command.RunOp[[]api.BootVerificationEntry](cmd.Context(), a.App, "list-boot-verifications", &in)
			if err != nil {
				return err
			}
			return a.Emit(list, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "POINT\tVM\tVERIFIED\tSECONDS\tVERDICT")
				for _, e := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\n", command.Short(e.PointID), e.VM, e.Started.Local().Format("2006-01-02 15:04"),
						e.DurationSeconds, bootVerdict(e))
				}
				_ = tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&in.VM, "vm", "", "only this VM's")
	return command.RemoteToo(command.Op(cmd, "list-boot-verifications"))
}

// bootVerdict is a listed result in a word or two.
func bootVerdict(e api.BootVerificationEntry) string {
	switch {
	case e.CannotVerify != "":
		return "cannot verify: " + e.CannotVerify
	case !e.Passed:
		return fmt.Sprintf("failed@%d %s", e.FailedStep, e.FailedStepName)
	case e.Review != "":
		return "ok, review the screenshot"
	}
	return "ok"
}

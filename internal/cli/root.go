// Package cli is coffer's command line: it assembles the command tree
// (the root command, its global flags, Execute) from the domain packages
// of commands (internal/cli/repocmd, backupcmd, restorecmd, mediacmd,
// fleetcmd, workercmd, configcmd, servercmd), each a thin layer that parses flags,
// calls an operation of internal/service and prints text, or the
// operation's internal/api document with --json. What the commands share
// (settings, output, RunOp, exit codes) is internal/cli/command. Here too
// is what needs the whole tree: the reference documentation generated
// from it (gendocs.go), the commands' declared operations
// (operations.go), and the demo, which runs other commands.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/backupcmd"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/cli/complete"
	"github.com/coffer-backup/coffer/internal/cli/configcmd"
	"github.com/coffer-backup/coffer/internal/cli/fleetcmd"
	"github.com/coffer-backup/coffer/internal/cli/mediacmd"
	"github.com/coffer-backup/coffer/internal/cli/replicacmd"
	"github.com/coffer-backup/coffer/internal/cli/repocmd"
	"github.com/coffer-backup/coffer/internal/cli/reposervercmd"
	"github.com/coffer-backup/coffer/internal/cli/restorecmd"
	"github.com/coffer-backup/coffer/internal/cli/servercmd"
	"github.com/coffer-backup/coffer/internal/cli/upgradecmd"
	"github.com/coffer-backup/coffer/internal/cli/workercmd"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/version"
)

// app is the command line of one run: the shared command.App, and the
// root's own global flags and tree.
type app struct {
	*command.App
	configPath  string
	root        *cobra.Command
	cpuProfile  string
	stopProfile func()
}

func newApp(a *command.App) *app { return &app{App: a} }

// Execute runs coffer with args and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return newApp(&command.App{Stdin: stdin, Stdout: stdout, Stderr: stderr}).execute(ctx, args)
}

// execute runs coffer with args as a: a fresh app whose streams (and
// announce hook) are set.
func (a *app) execute(ctx context.Context, args []string) int {
	root := a.newRoot()
	root.SetArgs(args)
	root.SetIn(a.Stdin)
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	err := root.ExecuteContext(ctx)
	a.Close()
	if a.stopProfile != nil {
		a.stopProfile()
	}
	return a.Exit(ctx, err)
}

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "coffer",
		Short: "agentless backup and recovery for virtual machines",
		Long: `NAME
    coffer - agentless backup and recovery for virtual machines

DESCRIPTION
    coffer backs up whole VMs from hypervisor snapshots (QEMU/KVM over QMP
    or through libvirt, VMware vSphere) and raw disk images into a deduplicated, compressed,
    encrypted repository on local disk or S3, and restores whole disks, new
    VMs, single files, or boots a VM straight from a backup.

    Settings come from flags, then environment variables, then the
    configuration file, then defaults (see ` + "`coffer config keys`" + `).
    Every command has a manual page: ` + "`coffer help COMMAND`" + `.

OUTPUT
    Text for people; with --json, the command's result document (snake_case
    fields, [] for empty lists, RFC 3339 times, byte counts in *_bytes
    fields), the same documents the REST API serves. A failure that no
    result document describes prints {"error": {"class", "message",
    "detail"}, "exit_code"}. Progress bars appear on a terminal only.

EXAMPLES
    coffer init
    coffer backup vm /run/coffer/web-1.qmp --snapshot-mode quiesced
    coffer snapshots --json
    coffer restore latest --to /tmp/web.raw

` + command.ExitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().Version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if isCompletion(cmd) {
				return nil // a completion sets itself up for the command it completes (package complete)
			}
			return a.setup(cmd)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return api.WithClass(api.Invalid, err) })
	// Which compressor the binary was built with decides backup speed
	// (cgo or not), so --version says it.
	root.SetVersionTemplate("coffer {{.Version}} (compression: " + repo.Compressor + ")\n")
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "config", "", "configuration file (default: $COFFER_CONFIG, ~/.config/coffer/config.yaml, /etc/coffer/coffer.yaml)")
	pf.BoolVar(&a.JSON, "json", false, "print results as JSON (for scripts); disables progress bars")
	pf.BoolVarP(&a.Quiet, "quiet", "q", false, "print only errors")
	pf.StringVar(&a.cpuProfile, "cpu-profile", "", "write a CPU profile (for developers)")
	_ = pf.MarkHidden("cpu-profile")
	for _, k := range config.Keys {
		if k.Flag == "" {
			continue
		}
		usage := k.Usage
		if k.Env != "" {
			usage += " [$" + k.Env + "]"
		}
		pf.String(k.Flag, "", usage)
	}
	a.root = root
	for _, c := range a.commands() {
		root.AddCommand(c)
	}
	root.SetOut(a.Stdout) // before the completion command, whose scripts are written where it was then
	documentCompletion(root)
	if err := complete.Register(root, func() string { return a.configPath }); err != nil {
		panic(err) // the table names a command or flag the tree lacks: every test of the tree says so
	}
	root.AddCommand(command.RemoteToo(command.FaceOnly(&cobra.Command{
		Use: "exit-codes", Short: "explain coffer's exit codes",
		Long: command.Manual(`Print what each of coffer's exit codes means: every command ends with
one of them, so scripts can tell a locked repository (4) from damage (5)
or a partial failure (6).`, "The table below.", "coffer exit-codes", "0."),
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprint(cmd.OutOrStdout(), command.ExitCodeHelp) },
	}, "explains the command line's own exit codes")))
	return root
}

// commands lists every subcommand explicitly (no init() registration):
// each domain package's, and the root's own.
func (a *app) commands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, domain := range []func(*command.App) []*cobra.Command{
		repocmd.Commands, backupcmd.Commands, restorecmd.Commands, mediacmd.Commands,
		fleetcmd.Commands, configcmd.Commands, servercmd.Commands, workercmd.Commands, reposervercmd.Commands,
		upgradecmd.Commands, replicacmd.Commands,
	} {
		cmds = append(cmds, domain(a.App)...)
	}
	return append(cmds, a.cmdDemo(), a.cmdGenerate(), a.cmdVersion())
}

func (a *app) setup(cmd *cobra.Command) error {
	if err := a.Setup(cmd, a.configPath); err != nil {
		return err
	}
	if a.cpuProfile != "" {
		f, err := os.Create(a.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		a.stopProfile = func() { pprof.StopCPUProfile(); _ = f.Close() } // a diagnostic: best effort
	}
	return nil
}

// isCompletion reports whether cmd is cobra's: the script of `coffer
// completion SHELL`, or the hidden `coffer __complete` its script runs.
// They need no settings, and must work with --server (COFFER_SERVER) set.
func isCompletion(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == cobra.ShellCompRequestCmd || (c.Name() == "completion" && c.Parent() == cmd.Root()) {
			return true
		}
	}
	return false
}

// Package cli is coffer's command line: one file per command (cmd_*.go),
// each a thin layer that parses flags, calls an operation of
// internal/service and prints text, or the operation's internal/api
// document with --json. Settings (flags, environment, file) become the
// service's configuration in service.go; error classes become exit codes
// in exactly one place (exit.go).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/apiclient"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// Version is set at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

// app holds what every command shares: resolved settings, output streams,
// the logger and output mode.
type app struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	configPath     string
	jsonOut        bool
	quiet          bool
	file           *config.File
	res            *config.Resolver
	log            *slog.Logger
	root           *cobra.Command
	cpuProfile     string
	stopProfile    func()
	// engine is the file's connections, repositories, limits, resource
	// groups and policies; svc the service built from the settings on
	// first use (service.go).
	engine *policy.Config
	server serverSettings
	// remote is the server's client when --server is set.
	remote *apiclient.Client
	notify *notify.Config
	maint  *maintenance.Config
	// metrics is what `coffer server` exposes at /metrics (nil in other
	// commands).
	metrics *metrics.Metrics
	svc     *service.Service
	pw      *passwordCache
	// announce, when set, tells the person at the terminal where the
	// server is and its setup link (nil when set up already) once it
	// serves, instead of the server's own first-run lines: `coffer demo
	// --serve` presents its console this way.
	announce func(url string, setup *api.SetupLink)
}

// Execute runs coffer with args and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return (&app{stdin: stdin, stdout: stdout, stderr: stderr}).execute(ctx, args)
}

// execute runs coffer with args as a: a fresh app whose streams (and
// announce hook) are set.
func (a *app) execute(ctx context.Context, args []string) int {
	stdout, stderr := a.stdout, a.stderr
	root := a.newRoot()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if a.svc != nil {
		// The task manager and notifier the command opened: tasks are
		// recorded when their operations return, pending notifications
		// wait in the catalog for the server.
		if cerr := a.svc.Close(); cerr != nil && a.log != nil {
			a.log.Warn("closing the catalog failed", "err", cerr)
		}
	}
	if a.stopProfile != nil {
		a.stopProfile()
	}
	if err == nil {
		return ExitOK
	}
	if strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") ||
		strings.HasPrefix(err.Error(), "unknown shorthand") || strings.Contains(err.Error(), "argument") && strings.Contains(err.Error(), "accepts") {
		err = api.WithClass(api.Invalid, err)
	}
	if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		err = api.Errorf(api.Cancelled, "%w: %w", context.Canceled, err)
	}
	code := exitCode(err)
	var r reported
	if a.jsonOut && errors.As(err, &r) {
		return code // the result document already describes the problems
	}
	if a.jsonOut {
		_ = json.NewEncoder(stdout).Encode(errorDoc(err))
	} else {
		fmt.Fprintf(stderr, "coffer: %v\n", err)
		if hint := advice(err); hint != "" {
			fmt.Fprintf(stderr, "coffer: %s\n", hint)
		}
	}
	return code
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

` + exitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup(cmd)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return api.WithClass(api.Invalid, err) })
	// Which compressor the binary was built with decides backup speed
	// (cgo or not), so --version says it.
	root.SetVersionTemplate("coffer {{.Version}} (compression: " + repo.Compressor + ")\n")
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "config", "", "configuration file (default: $COFFER_CONFIG, ~/.config/coffer/config.yaml, /etc/coffer/coffer.yaml)")
	pf.BoolVar(&a.jsonOut, "json", false, "print results as JSON (for scripts); disables progress bars")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "print only errors")
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
	root.AddCommand(remoteToo(faceOnly(&cobra.Command{
		Use: "exit-codes", Short: "explain coffer's exit codes",
		Long: manual(`Print what each of coffer's exit codes means: every command ends with
one of them, so scripts can tell a locked repository (4) from damage (5)
or a partial failure (6).`, "The table below.", "coffer exit-codes", "0."),
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprint(cmd.OutOrStdout(), exitCodeHelp) },
	}, "explains the command line's own exit codes")))
	return root
}

// commands lists every subcommand explicitly (no init() registration).
func (a *app) commands() []*cobra.Command {
	return []*cobra.Command{
		a.cmdInit(), a.cmdBackup(), a.cmdSnapshots(), a.cmdRestore(), a.cmdKey(),
		a.cmdVerify(), a.cmdForget(), a.cmdGC(), a.cmdStats(), a.cmdLocks(), a.cmdStorageSnapshots(),
		a.cmdConfig(), a.cmdProtect(), a.cmdDemo(), a.cmdRepair(), a.cmdCopy(), a.cmdFiles(), a.cmdInstant(),
		a.cmdCatalog(), a.cmdRun(), a.cmdJobs(), a.cmdJob(), a.cmdVMs(), a.cmdPolicy(), a.cmdServer(),
		a.cmdUser(), a.cmdToken(), a.cmdACL(), a.cmdAudit(), a.cmdMedia(), a.cmdPlan(), a.cmdBench(),
		a.cmdGenerate(),
	}
}

func (a *app) setup(cmd *cobra.Command) error {
	f, err := config.Load(a.configPath)
	if err != nil {
		return api.WithClass(api.Invalid, err)
	}
	// Every structured section is decoded with its owner's schema whatever
	// the command, so an unknown key in any section is an error (exit 2)
	// like an unknown top-level key, and no section is accepted and then
	// ignored. What the sections say is checked by the operations that
	// use them.
	if a.engine, err = policy.Decode(f); err != nil {
		return api.WithClass(api.Invalid, err)
	}
	if err := f.Decode("server", &a.server); err != nil {
		return api.WithClass(api.Invalid, err)
	}
	if a.notify, err = notify.Decode(f); err != nil {
		return api.WithClass(api.Invalid, err)
	}
	if a.maint, err = maintenance.Decode(f); err != nil {
		return api.WithClass(api.Invalid, err)
	}
	// The command line acts for whoever can run it with the catalog at
	// hand: what it changes is recorded under auth.LocalUser.
	cmd.SetContext(auth.WithSubject(cmd.Context(), auth.Local()))
	a.file = f
	flags := cmd.Flags()
	a.res = &config.Resolver{File: f, Flag: func(name string) (string, bool) {
		fl := flags.Lookup(name)
		if fl == nil || !fl.Changed {
			return "", false
		}
		return fl.Value.String(), true
	}}
	level := slog.LevelWarn
	if err := level.UnmarshalText([]byte(a.res.String("log-level"))); err != nil {
		return usagef("log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.res.String("log-format") {
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	case "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	default:
		return usagef("log-format must be text or json")
	}
	slog.SetDefault(a.log)
	if err := a.setupRemote(cmd); err != nil {
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

// interactive reports whether progress bars and prompts are wanted.
func (a *app) interactive() bool {
	if a.jsonOut || a.quiet {
		return false
	}
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printJSON writes v as indented JSON to stdout.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printf writes human output unless --quiet or --json.
func (a *app) printf(format string, args ...any) {
	if a.quiet || a.jsonOut {
		return
	}
	fmt.Fprintf(a.stdout, format, args...)
}

// Package command is what every command of coffer's command line shares,
// and nothing of the command tree itself: the App (resolved settings,
// output streams, the logger, the service or the server's client), RunOp
// and RunPage (an operation by ID, here or through a server), the
// annotations a command declares (Op, FaceOnly, RemoteToo, Manual), usage
// errors and exit codes (exit.go, the one place errors become exit
// codes), progress bars, password prompts and units.
//
// The commands themselves live in one package per domain
// (internal/cli/repocmd, backupcmd, restorecmd, mediacmd, fleetcmd,
// workercmd, configcmd, servercmd), which import this package and never each
// other; internal/cli assembles them into the tree. What two domains
// print alike (short IDs, forget's verdict) is here, so that neither
// needs the other.
package command

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

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
	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/telemetry"
	"github.com/coffer-backup/coffer/internal/version"
)

// App holds what every command shares: resolved settings, output streams,
// the logger and output mode.
type App struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	// JSON and Quiet are the global --json and --quiet.
	JSON  bool
	Quiet bool
	Res   *config.Resolver
	Log   *slog.Logger
	file  *config.File
	// engine is the file's connections, repositories, limits, resource
	// groups and policies; svc the service built from the settings on
	// first use (service.go).
	engine *policy.Config
	// Server is the configuration file's server: section (internal/server
	// owns its schema).
	Server server.Settings
	// Realms is the realms: section, the server's sign-in realms
	// (internal/auth owns its schema; the server checks it at start).
	Realms []auth.RealmConfig
	// Remote is the server's client when --server is set.
	Remote *apiclient.Client
	notify *notify.Config
	maint  *maintenance.Config
	// Metrics is what `coffer server` exposes at /metrics (nil in other
	// commands).
	Metrics *metrics.Metrics
	svc     *service.Service
	pw      *passwordCache
	// stopTracing flushes and stops the traces' exporter (Close).
	stopTracing telemetry.Stop
	// completing is a shell completion's App (Completing).
	completing bool
	// Announce, when set, tells the person at the terminal where the
	// server is and its setup link (nil when set up already) once it
	// serves, instead of the server's own first-run lines: `coffer demo
	// --serve` presents its console this way.
	Announce func(url string, setup *api.SetupLink)
}

// Setup resolves the settings of cmd (its flags, the environment and the
// configuration file at configPath) before it runs.
func (a *App) Setup(cmd *cobra.Command, configPath string) error {
	f, err := config.Load(configPath)
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
	if err := f.Decode("server", &a.Server); err != nil {
		return api.WithClass(api.Invalid, err)
	}
	if err := f.Decode("realms", &a.Realms); err != nil {
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
	a.Res = &config.Resolver{File: f, Flag: func(name string) (string, bool) {
		fl := flags.Lookup(name)
		if fl == nil || !fl.Changed {
			return "", false
		}
		return fl.Value.String(), true
	}}
	level := slog.LevelWarn
	if err := level.UnmarshalText([]byte(a.Res.String("log-level"))); err != nil {
		return Usagef("log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.Res.String("log-format") {
	case "json":
		a.Log = slog.New(telemetry.LogHandler(slog.NewJSONHandler(a.Stderr, opts)))
	case "text":
		a.Log = slog.New(telemetry.LogHandler(slog.NewTextHandler(a.Stderr, opts)))
	default:
		return Usagef("log-format must be text or json")
	}
	slog.SetDefault(a.Log)
	if a.stopTracing, err = telemetry.Start(a.Res.String("tracing.otlp-endpoint"), version.Get().Version, a.Log); err != nil {
		return api.WithClass(api.Invalid, err)
	}
	return a.setupRemote(cmd)
}

// Close closes the service the command opened, if any: the task manager
// and notifier it opened: tasks are recorded when their operations
// return, pending notifications wait in the catalog for the server.
func (a *App) Close() {
	if a.svc != nil {
		if cerr := a.svc.Close(); cerr != nil && a.Log != nil {
			a.Log.Warn("closing the catalog failed", "err", cerr)
		}
	}
	// The spans still buffered go to the collector before the process
	// ends (for a few seconds at most: telemetry.Stop).
	if a.stopTracing != nil {
		if err := a.stopTracing(); err != nil && a.Log != nil {
			a.Log.Warn("sending the last traces failed", "err", err)
		}
		a.stopTracing = nil
	}
}

// Interactive reports whether progress bars and prompts are wanted.
func (a *App) Interactive() bool {
	if a.JSON || a.Quiet {
		return false
	}
	f, ok := a.Stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printJSON writes v as indented JSON to stdout.
func (a *App) printJSON(v any) error {
	enc := json.NewEncoder(a.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Printf writes human output unless --quiet or --json.
func (a *App) Printf(format string, args ...any) {
	if a.Quiet || a.JSON {
		return
	}
	fmt.Fprintf(a.Stdout, format, args...)
}

package servercmd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/auth/factorkey"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/procs"
	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/accessops"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/replicaops"
)

// defaultAdmin is the first administrator's name unless --admin says
// otherwise.
const defaultAdmin = "admin"

func (a *app) cmdServer() *cobra.Command {
	var listen, admin string
	var insecure bool
	cmd := command.FaceOnly(&cobra.Command{
		Use:   "server",
		Short: "serve the REST API and run backup policies on their schedules (the coffer daemon)",
		Long: command.Manual(`Serve coffer's REST API (/api/v1, its OpenAPI document at
/api/v1/openapi.json), /healthz, /readyz and the console (/ui/), and run
every policy that has a schedule (cron syntax or @daily, @every 4h, ...),
until stopped with SIGTERM or Ctrl-C.

The policies are those in effect: the configuration file's and those
created through the API (`+"`coffer config`"+`, or the API's configuration
routes); when one of those changes, here or on another server sharing the
catalog, the schedules and limits reload within seconds, and runs in
progress go on. A policy whose previous run still goes when its time
comes is skipped, and the skip is recorded. Jobs, tasks and events go to
the catalog (`+"`coffer jobs`"+`).

Beside them it runs the maintenance section's jobs (gc, verify, forget,
copy) on their schedules within their windows (the section is the file's,
read at start), checks protection (RPO, repository usage, lapsing locks)
for its metrics (/metrics, with a token holding Sys.Audit on /system) and
notifications, and delivers notifications. Several servers may share a
PostgreSQL catalog: the one holding its schedules lease runs the
schedules, each run once, and another takes over within
maintenance.takeover-after when it dies. With no scheduled policy the
server waits for one.

HTTPS by default: with server.tls-cert and server.tls-key, or else with a
self-signed certificate (ECDSA P-256) made at the first start in the
state directory (server/tls.crt); its SHA-256 fingerprint is printed at
every start, for clients to pin (coffer --server-fingerprint). Plain HTTP
only with --insecure-http (server.insecure-http), and only on a loopback
address.

At the first start, when the catalog has no user, the administrator
account is created (--admin, default admin) and a one-time setup link is
printed: open it to choose the password (there is no default password).
`+"`coffer server init`"+` does the same without starting the server.

Every request is authenticated (an API token, or a browser session) and
checked against the roles on the object it acts on; every change is
recorded in the audit log. What an API request writes on this host goes
under server.restore-dir; backing up disk images through the API reads
them from server.image-dir.

SIGTERM drains: the server stops accepting, lets running requests and
policy runs finish for server.drain-timeout (default 5m), then cancels
them (their operations end as cancelled) and exits. Scheduled runs still
going at SIGTERM are cancelled at once (VMs release their snapshots).
Leftovers of a coffer that died mid-backup are removed at start, and so
are the VMs and overlays of a test failover killed with its server.

Under systemd (the packages' coffer.service, Type=notify) it says READY=1
once it serves, and its catalog and state go to $STATE_DIRECTORY unless
configured. SIGHUP (systemctl reload coffer) reads the configuration file
again: its sections that configuration objects also set (connections,
repositories, policies, notifications...) take effect as after a change
through the API; a file that would leave the configuration invalid is
refused, logged, and the configuration in effect stays. The server:,
maintenance: and top-level keys apply at the next start.`,
			`On stderr: the address served and the certificate's fingerprint, the
setup link at the first start, then one log line per request (operation,
user, status, duration; --log-format json for collectors) and per job.`,
			`coffer server
coffer server --listen 0.0.0.0:8443 --log-format json --log-level info
coffer server --insecure-http --listen 127.0.0.1:8080`,
			`0 when stopped; 2 when the settings are refused (plain HTTP on a
non-loopback address, a certificate without its key, ...) or the
configuration is refused at start.`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen != "" {
				a.Server.Listen = listen
			}
			if insecure {
				a.Server.InsecureHTTP = true
			}
			return a.runServer(cmd.Context(), admin)
		},
	}, "the server itself: its routes are the table's operations (internal/server)")
	cmd.Flags().StringVar(&listen, "listen", "", "address to serve on (server.listen; default "+server.DefaultListen+")")
	cmd.Flags().BoolVar(&insecure, "insecure-http", false, "serve plain HTTP (loopback addresses only; server.insecure-http)")
	cmd.Flags().StringVar(&admin, "admin", defaultAdmin, "the administrator's name, made at the first start")
	cmd.AddCommand(a.cmdServerInit())
	return cmd
}

func (a *app) cmdServerInit() *cobra.Command {
	var admin string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "create the administrator account and print its one-time setup link",
		Long: command.Manual(`Prepare the first run of the server: create the administrator account
(--admin, default admin) with the Admin role on /, and print a one-time
link to choose its password (valid for an hour; there is no default
password). Run again before the link is used, it replaces the link; once
any user has a password it refuses (users then get links from an
administrator: coffer user link NAME).`,
			`The setup link on stdout. --json: {user, token, link}.`,
			`coffer server init
coffer server init --admin alice`,
			"0; 2 (conflict) when coffer is set up already."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.Server.Check(); err != nil {
				return command.Usagef("%v", err)
			}
			link, err := command.Call(a.App, func(s *service.Service) (*api.SetupLink, error) {
				return accessops.Ops{Service: s}.Bootstrap(cmd.Context(), admin)
			})
			if err != nil {
				return err
			}
			return a.Emit(link, nil, func() { a.Printf("%s\n", setupText(link)) })
		},
	}
	cmd.Flags().StringVar(&admin, "admin", defaultAdmin, "the administrator's name")
	return command.FaceOnly(cmd, "the first-run setup of the server, on its host (never through the API)")
}

func setupText(l *api.SetupLink) string {
	if l.Link != "" {
		return fmt.Sprintf("Choose the password of %s within the hour, once, at:\n  %s", l.User, l.Link)
	}
	return fmt.Sprintf("Choose the password of %s within the hour with the setup token %s", l.User, l.Token)
}

// runServer starts the server's components and serves until ctx ends.
func (a *app) runServer(ctx context.Context, admin string) error {
	st := a.Server
	if err := st.Check(); err != nil {
		return command.Usagef("%v", err)
	}
	if st.InsecureHTTP {
		if err := server.CheckPlainHTTP(st.Listen); err != nil {
			return command.Usagef("%v", err)
		}
	}
	stateDir := a.Res.Path("state-dir")
	if st.RestoreDir == "" {
		st.RestoreDir = filepath.Join(stateDir, "restores")
	}
	exportDir := filepath.Join(stateDir, "exports")
	for _, d := range []string{st.RestoreDir, exportDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	var cert *server.Certificate
	if !st.InsecureHTTP {
		var err error
		if cert, err = server.LoadCertificate(st.TLSCert, st.TLSKey, filepath.Join(stateDir, "server"), st.CertificateHosts()); err != nil {
			return command.Usagef("%v", err)
		}
	}
	ln, err := net.Listen("tcp", st.Listen)
	if err != nil {
		return command.Usagef("server.listen %s: %v", st.Listen, err)
	}
	defer ln.Close()
	url := st.URL(ln.Addr().String())

	// The collectors of /metrics, fed by the service's tasks, health
	// monitor and engine: made before the service's configuration, which takes them.
	a.Metrics = metrics.New()
	if cert != nil && cert.Leaf != nil { // LoadX509KeyPair parses the leaf
		a.Metrics.SetCertificateExpiry(cert.Leaf.NotAfter)
	}
	cfg, err := a.ServiceConfig()
	if err != nil {
		return err
	}
	// The catalog stays open for the server's life: the access control
	// every request goes through, the tasks and the operations share it.
	// Opened by the service, it is exported into the repository before a
	// migration.
	cat, err := operations.New(cfg).OpenCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	access, err := a.accessControl(cat, st, stateDir)
	if err != nil {
		return err
	}
	bg := service.NewBackground(ctx)
	cfg.Local, cfg.Access, cfg.PublicURL, cfg.Background, cfg.OpenCatalog = false, access, url, bg, cat
	cfg.Files = service.FileRoots{RestoreDir: st.RestoreDir, ImageDir: st.ImageDir, ExportDir: exportDir}
	svc := operations.New(cfg)
	// Every long operation and policy run is a task of the catalog
	// (listed, followed and cancelled from any process sharing it); the
	// server prunes their history and delivers notifications.
	if err := startService(ctx, svc); err != nil {
		return err
	}

	link, err := a.firstRun(ctx, svc, admin)
	if err != nil {
		return err
	}
	// On the terminal only, never in the log: the link is a credential.
	if link != nil && a.Announce == nil {
		fmt.Fprintf(a.Stderr, "coffer server: first run: the administrator %s was created.\n%s\n", link.User, setupText(link))
	}
	fmt.Fprintf(a.Stderr, "coffer server: serving %s\n", url)
	if cert != nil {
		made := ""
		if cert.Created {
			made = " (made now: " + cert.CertFile + ")"
		}
		fmt.Fprintf(a.Stderr, "coffer server: TLS certificate SHA-256 fingerprint %s%s\n", cert.Fingerprint, made)
	}
	if err := svc.Ready(ctx); err != nil {
		a.Log.Warn("not ready yet (/readyz says why until it is)", "err", err)
	}
	if a.Announce != nil {
		a.Announce(url, link)
	}
	srv := server.New(server.Config{Service: svc, Access: access, Logger: a.Log, Metrics: a.Metrics.Handler()})
	// Drained in reverse: the listener first, the task manager and
	// notifier last.
	components := []server.Component{
		{Name: "tasks", Start: func(context.Context) (<-chan error, error) { return nil, nil },
			Drain: func(context.Context) error { return svc.Close() }},
		server.HTTP(srv.Handler(), ln, cert, a.Log),
		background(bg),
		schedules(svc),
		pruneAccess(access, a.Log),
		idleProcessors(a.Log),
		a.serviceManager(svc, url), // last: ready once the others run
	}
	return server.Run(ctx, a.Log, time.Duration(st.DrainTimeout), components)
}

// startService starts the service's task manager and notifier, then
// stops and removes what a test failover killed with its server left
// (its VMs running on overlays), before the server serves.
func startService(ctx context.Context, svc *service.Service) error {
	if err := svc.Start(ctx, service.StartOptions{Prune: true, Deliver: true}); err != nil {
		return err
	}
	replicaops.Ops{Service: svc}.RemoveFailoverLeftovers(ctx)
	return nil
}

// firstRun creates the administrator when the catalog has no user yet
// and returns its setup link (nil when coffer is set up already).
func (a *app) firstRun(ctx context.Context, svc *service.Service, admin string) (*api.SetupLink, error) {
	empty, err := accessops.Ops{Service: svc}.NeedsSetup(ctx)
	if err != nil || !empty {
		return nil, err
	}
	return accessops.Ops{Service: svc}.Bootstrap(ctx, admin)
}

// idleProcessors holds the server on one Go processor while it is nearly
// idle, as a server leading workers mostly is, waiting for the catalog
// (package procs says why).
func idleProcessors(log *slog.Logger) server.Component {
	stop := func() {}
	return server.Component{Name: "idle processors",
		Start: func(context.Context) (<-chan error, error) {
			stop = procs.ShrinkWhenIdle(procs.Options{Log: log})
			return nil, nil
		},
		Drain: func(context.Context) error { stop(); return nil },
	}
}

// background drains the work and serving API requests leave running.
func background(bg *service.Background) server.Component {
	return server.Component{Name: "background",
		Start: func(context.Context) (<-chan error, error) { return nil, nil },
		Drain: func(ctx context.Context) error { bg.Drain(ctx); return nil },
	}
}

// schedules runs the policies that have a schedule; a configuration the
// schedules refuse stops the server. Draining cancels running scheduled
// jobs, which stop cleanly.
func schedules(svc *service.Service) server.Component {
	// Made before any component starts, the HTTP listener too: the runs
	// started through the API join the schedules' engine.
	served := svc.ExpectServing()
	cancel := func() {}
	finished := make(chan struct{})
	return server.Component{Name: "schedules",
		Start: func(parent context.Context) (<-chan error, error) {
			var ctx context.Context
			ctx, cancel = context.WithCancel(context.WithoutCancel(parent))
			failed := make(chan error, 1)
			go func() {
				defer close(finished)
				defer served() // also when RunSchedules ends before it serves
				if err := (fleetops.Ops{Service: svc}).RunSchedules(ctx); err != nil && ctx.Err() == nil {
					failed <- err
				}
			}()
			return failed, nil
		},
		Drain: func(context.Context) error {
			cancel()
			<-finished
			return nil
		},
	}
}

// pruneEvery is how often expired sessions, links and throttles are
// removed (they are refused anyway; this reclaims their rows).
const pruneEvery = time.Hour

func pruneAccess(access *auth.Service, log interface{ Warn(string, ...any) }) server.Component {
	stop := make(chan struct{})
	done := make(chan struct{})
	return server.Component{Name: "access-prune",
		Start: func(ctx context.Context) (<-chan error, error) {
			go func() {
				defer close(done)
				t := time.NewTicker(pruneEvery)
				defer t.Stop()
				for {
					if _, err := access.Prune(context.WithoutCancel(ctx)); err != nil {
						log.Warn("pruning sessions failed", "err", err)
					}
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			}()
			return nil, nil
		},
		Drain: func(context.Context) error { close(stop); <-done; return nil },
	}
}

// accessControl is the server's access control over its catalog: with
// the sign-in realms of the configuration file, and the key that seals
// TOTP seeds in the catalog, STATE/server/second-factor.key (0600), made
// at the first start.
func (a *app) accessControl(cat catalog.Catalog, st server.Settings, stateDir string) (*auth.Service, error) {
	path := factorkey.File(stateDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	o := st.AuthOptions()
	var err error
	if o.SecondFactorKey, err = factorkey.Load(path); err != nil {
		return nil, err
	}
	if o.Realms, err = auth.NewRealms(a.Realms); err != nil {
		return nil, command.Usagef("realms: %v", err)
	}
	access, err := auth.New(cat, o)
	if err != nil {
		return nil, command.Usagef("%v", err)
	}
	return access, nil
}

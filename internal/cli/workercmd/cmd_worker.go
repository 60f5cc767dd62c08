package workercmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/procs"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/replicaops"
)

// workerFlags are what `coffer worker` is told about itself.
type workerFlags struct {
	cfg       fleet.Config
	tokenFile string
	// insecureCredentials lets a worker log in with --catalog's (the
	// servers') credentials: for tests only.
	insecureCredentials bool
	restoreDir          string
	// schemaWait is how long it waits for a server to migrate River's
	// schema to its version.
	schemaWait    time.Duration
	metricsListen string
	protocol      int // hidden: a worker of another protocol, to see it refused
}

func (a *app) cmdWorker() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "run a worker of the fleet on this host: it backs up the VMs and runs the operations the servers of its catalog hand to it",
		Long: command.Manual(`Run a worker: a process on a hypervisor host or a proxy that registers in the
catalog (the --catalog the servers share) under its name, with its reach
(what it can get at) and its slots (tasks at once), and renews a heartbeat
every few seconds while it backs up the VMs of policy runs placed on it
and runs the operations the servers hand to it (over the catalog's
PostgreSQL database; a SQLite catalog hands it nothing). It backs each VM
up from its own configuration (the policy, its connection and
repository, with their credentials): a unit carries names, never
secrets. A worker that cannot renew for half the dead interval cancels
its running work and exits (the servers declare it lost after the whole
interval); a supervisor restarts it. SIGTERM or Ctrl-C drains it, as
coffer workers drain does: it takes no new work, lets its running work
finish, deregisters and exits. A worker whose fleet protocol the servers
do not speak is refused at registration.

The worker logs in to the catalog with its own token (--token-file, or
$COFFER_WORKER_TOKEN; coffer workers token create NAME makes one): its
PostgreSQL role reaches the queue, its own registry row, the jobs' logs
and the configuration objects, nothing else, and it never migrates the
catalog: a catalog whose schema is older or newer than this coffer's is
refused (install the servers' version). --catalog is then the address
alone, without user or password. A --catalog that logs in as a worker's
own role (coffer_worker_NAME) is that worker's credential too. A worker
is refused the servers' credentials: without a token, --catalog must be
a worker's role (--insecure-catalog-credentials lets it use any, for
tests only). A SQLite catalog has no workers: it is refused at once.`,
			`Log lines (--log-level info): registered, draining, fenced.`,
			`coffer worker --catalog postgres://db.example/coffer --token-file /etc/coffer/worker.token --reach-connections kvm7 --reach-hosts kvm7/kvm7
coffer worker --slots 8 --reach-connections vc1 --reach-repositories main`,
			"0 once drained; 1 when fenced (or its token revoked); 2 for a bad token, no credential of its own or a SQLite catalog; 3 for a token the catalog refuses; 8 for a protocol or catalog schema the worker does not speak."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.cfg.Version = cmd.Root().Version
			f.cfg.Protocol = f.protocol
			return a.runWorker(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.Name, "name", "", "the worker's name: lower-case letters and digits, - or _ between them (default: the host name)")
	fl.IntVar(&f.cfg.Slots, "slots", 0, "tasks the worker runs at once (default: one per core)")
	fl.StringSliceVar(&f.cfg.Reach.Connections, "reach-connections", nil, "connections the worker serves (comma-separated)")
	fl.StringSliceVar(&f.cfg.Reach.Hosts, "reach-hosts", nil, "hypervisor hosts whose VMs it reads, CONNECTION/HOST as the connection names the host (comma-separated)")
	fl.StringSliceVar(&f.cfg.Reach.Datastores, "reach-datastores", nil, "datastores it mounts (comma-separated)")
	fl.StringSliceVar(&f.cfg.Reach.Libraries, "reach-libraries", nil, "media libraries attached to it (comma-separated)")
	fl.StringSliceVar(&f.cfg.Reach.Repositories, "reach-repositories", nil, "repositories it can write (comma-separated)")
	fl.BoolVar(&f.cfg.Reach.CanBoot, "can-boot", false, "it can run QEMU (boot verification)")
	fl.DurationVar(&f.cfg.Heartbeat, "heartbeat", fleet.DefaultHeartbeat, "how often it renews its heartbeat")
	fl.DurationVar(&f.cfg.DeadAfter, "dead-after", fleet.DefaultDeadAfter, "the servers' dead interval: it fences itself after half of it without a renewal")
	fl.DurationVar(&f.schemaWait, "schema-wait", fleet.DefaultSchemaWait,
		"how long it waits for a server of its version to migrate an older River schema before it refuses it (a newer one is refused at once)")
	fl.StringVar(&f.restoreDir, "restore-dir", "", "where the restores the servers hand to it write: their paths are relative to it (default: STATE-DIR/restores)")
	fl.StringVar(&f.metricsListen, "metrics-listen", "",
		"serve the worker's metrics (how it throttles its reads: coffer_worker_*) over plain HTTP at ADDRESS/metrics, e.g. 127.0.0.1:9464 (default: none)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the worker's token (coffer workers token create NAME) [$COFFER_WORKER_TOKEN: the token itself; under systemd the default is the unit's credential worker-token]")
	fl.IntVar(&f.protocol, "protocol", fleet.Protocol, "the fleet protocol to speak (for tests of version skew)")
	_ = fl.MarkHidden("protocol")
	fl.BoolVar(&f.insecureCredentials, "insecure-catalog-credentials", false,
		"log in with --catalog's own credentials, the servers', rather than a worker token: for tests only")
	return command.FaceOnly(cmd, "runs a worker process on this host, not an operation of the servers")
}

// defaultName is the host's name as a worker name: lower-case, its
// first label.
func defaultName() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(strings.ToLower(h), ".")
	return name
}

// runWorker joins the fleet and works until drained or fenced.
func (a *app) runWorker(ctx context.Context, f workerFlags) error {
	cfg := f.cfg
	if a.Remote != nil {
		return command.Usagef("a worker reaches its servers through their catalog (--catalog), not --server")
	}
	token, err := readToken(f.tokenFile)
	if err != nil {
		return err
	}
	loc := a.CatalogLocation()
	if _, own := fleet.WorkerOfDSN(loc); cfg.Name == "" && token == "" && !own {
		cfg.Name = defaultName() // else the credential's
	}
	if cfg.Name != "" {
		if err := fleet.CheckName(cfg.Name); err != nil {
			return command.Usagef("--name: %v", err)
		}
	}
	if cfg.Slots == 0 {
		cfg.Slots = runtime.NumCPU()
	}
	if cfg.Slots < 0 {
		return command.Usagef("--slots must be at least 1")
	}
	if !catalogopen.IsPostgres(loc) {
		return command.Usagef("a worker needs its servers' PostgreSQL catalog (--catalog postgres://...): with a SQLite catalog (%s) the server backs up in its own process",
			catalogopen.Redact(loc))
	}
	scfg, err := a.workerConfig(f.restoreDir)
	if err != nil {
		return err
	}
	c, err := a.connect(ctx, loc, token, f.insecureCredentials, f.schemaWait, &cfg, scfg)
	if err != nil {
		return err
	}
	defer c.cat.Close()
	cfg.Host, _ = os.Hostname()
	cfg.Log = a.Log
	// Before it takes work: what a killed process of this worker left on
	// its hosts goes first, or the retries of its attempts find it there.
	fleet.CleanupLeftovers(ctx, c.svc, cfg.Reach.Connections, a.Log)
	// So do a killed test failover's VMs and overlays (a DR site's worker
	// runs them), as at a server's start; a test still running in
	// another process of this host holds its run's lock and is spared.
	replicaops.Ops{Service: c.svc}.RemoveFailoverLeftovers(ctx)
	ln, err := listenMetrics(f.metricsListen)
	if err != nil {
		return err
	}
	if ln != nil {
		defer func() { _ = ln.Close() }() // a worker refused at Join serves none (the server's Close closes it too)
	}
	m, err := fleet.Join(ctx, fleet.Registry{Catalog: c.cat}, cfg)
	if errors.Is(err, fleet.ErrProtocol) {
		return api.WithClass(api.UnsupportedVersion, err)
	}
	if err != nil {
		return refusedToken(err, cfg.Name)
	}
	defer serveMetrics(ln, m, a.Log)()
	// Between its units a worker waits, as a server does: one processor
	// then (package procs says why).
	stopShrinking := procs.ShrinkWhenIdle(procs.Options{Log: a.Log})
	defer stopShrinking()
	// Registered: under systemd (coffer-worker.service, Type=notify) the
	// unit is now active.
	a.NotifyServiceManager("READY=1\nSTATUS=registered as worker " + m.Worker().Name)
	// SIGTERM and Ctrl-C cancel ctx: that drains the worker, whose work
	// then goes on under a context the signal does not end.
	go func() {
		<-ctx.Done()
		a.NotifyServiceManager("STOPPING=1\nSTATUS=draining")
		if err := m.Drain(context.WithoutCancel(ctx)); err != nil {
			a.Log.Warn("worker drain", "worker", cfg.Name, "err", err)
		}
	}()
	return m.Run(context.WithoutCancel(ctx), c.work(m, a.Log))
}

// workerConfig is the configuration of the service a worker works with:
// the command line's settings, but confined as a server's, since the
// operations handed to it were authorised by a server for a user who is
// not this host's administrator: the paths they name are relative to the
// worker's restore directory.
func (a *app) workerConfig(restoreDir string) (service.Config, error) {
	if restoreDir == "" {
		restoreDir = filepath.Join(a.Res.Path("state-dir"), "restores")
	}
	if err := os.MkdirAll(restoreDir, 0o700); err != nil {
		return service.Config{}, err
	}
	cfg, err := a.ServiceConfig()
	if err != nil {
		return service.Config{}, err
	}
	cfg.Local = false
	cfg.Files = service.FileRoots{RestoreDir: restoreDir}
	return cfg, nil
}

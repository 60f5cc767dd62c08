// Package service holds coffer's use cases: one method per operation, the
// one place the command line, the REST API and the console all call. A
// face parses its input, calls the service and prints or serves the
// document (internal/api) it returns.
//
// The service is where the rules that must hold whoever asks live: it
// takes the leases (a restore lease keeps gc from deleting a point while
// it is read; verify takes its own), keeps the catalog in step with the
// repository (forget, protect, backups), and turns core values into the
// result documents. It takes configuration structs, never a face's
// settings: the command line resolves flags, environment and file into a
// Config, the server its own configuration.
package service

import (
	"log/slog"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/store"
	storeall "github.com/coffer-backup/coffer/internal/store/all"
)

// Config is everything the service needs to know about the installation.
type Config struct {
	// Repository is the default repository: what an operation works on
	// unless it names another one.
	Repository Location
	// OtherPassword opens the second repository of a copy, and the one
	// `init --copy-keys-from` takes its keys from.
	OtherPassword PasswordSource
	// Stores configures the storage backends (S3, the metadata cache).
	Stores storeall.Config
	// Catalog is the catalog's location: a SQLite file or a postgres://
	// URL ("" is catalogopen.DefaultLocation()).
	Catalog string
	// OpenCatalog, when set, is the catalog at that location, kept open
	// by a long-running process (the server): operations use it instead
	// of opening the catalog for each call, which costs a connection
	// pool and a migration check (milliseconds on PostgreSQL). The
	// command line leaves it nil: one operation per process.
	OpenCatalog catalog.Catalog
	// StateDir holds the journals of what coffer creates on hypervisors,
	// instant recovery sessions and, by default, the catalog.
	StateDir string
	// Engine holds the configuration file's connections, repositories,
	// limits, resource groups and policies (nil: none), Notify its
	// notifications section (nil: none); EngineSource is the file's path,
	// for messages. What operations run on is these merged with the
	// objects created through the API (internal/configobj).
	Engine       *policy.Config
	Notify       *notify.Config
	EngineSource string
	// ConfigPoll is how often WatchConfig asks the catalog whether
	// another process changed a configuration object (default
	// DefaultConfigPoll).
	ConfigPoll time.Duration
	// Worker names this host in the catalog (default: the host name).
	Worker string
	Logger *slog.Logger
	// Display shows jobs as they run (default: LogDisplay);
	// every one is recorded in the catalog besides.
	Display Display
	// User names who starts tasks when the context names nobody
	// (task.WithUser): the local user of a command-line process
	// (default: the process's user).
	User string
	// TaskHistory is how long finished tasks are kept (0: 90 days;
	// negative: forever); pruned by processes started with Prune.
	TaskHistory time.Duration
	// Maintenance is the configuration file's maintenance section:
	// schedules, windows, thresholds, several servers (nil: none,
	// defaults). It is the file's alone (no configuration object sets
	// it); its jobs are resolved against the configuration in effect.
	Maintenance *maintenance.Config
	// Metrics receives what the server exposes to Prometheus (nil:
	// none): tasks as they end, the health monitor's state, the engine's
	// slots.
	Metrics *metrics.Metrics
	// WrapStore wraps every store the service opens (crash tests kill the
	// process at a chosen mutation through it); nil leaves them alone.
	WrapStore func(store.Store) store.Store

	// Local makes an operation without an authenticated subject act as
	// the local administrator (auth.Local): the command line, which has
	// direct access to the catalog and the repositories anyway; and the
	// paths an operation's input names are this host's, as given (a
	// server's are confined under its Files roots). The server never sets
	// it: a request without a subject is allowed nothing.
	Local bool
	// Access is the access control the server shares with its
	// middleware; nil opens one over the catalog for each operation.
	Access *auth.Service
	// AccessOptions are those of the access control opened without a
	// server (the server.* settings: which roles need a second factor).
	AccessOptions auth.Options
	// PublicURL is the server's address as its users reach it
	// (https://host:port), for the setup links it hands out.
	PublicURL string
	// Files confines the server-side paths an API request names.
	Files FileRoots
	// Operations are the operations the service runs by ID (Invoke): the
	// whole table, internal/service/operations.All, for every face.
	Operations []Operation
	// Predictor predicts each policy run as the engine starts it, from
	// the catalog's record (planops.Predictor; nil: no prediction).
	Predictor func(catalog.Catalog) engine.Predictor
	// Background runs what an API request starts to go on after its
	// answer (instant recovery serving, NBD exports, policy runs not
	// waited for), until it is stopped or the server drains; nil: the
	// operations that need it are refused.
	Background *Background
}

// Location is a repository and how to get its password.
type Location struct {
	Location string
	Password PasswordSource
}

// PasswordSource returns a repository password when one is needed (a
// face may prompt for it); nil means none.
type PasswordSource func() ([]byte, error)

// Service runs coffer's operations. It is safe for concurrent use.
type Service struct {
	*controlState // shared by the services ForRepository derives
	Config        Config
	log           *slog.Logger
	display       Display
	// BoundRepo names the default repository as the request that bound
	// it did (ForRepository; "default" for the top-level repository
	// setting); repoIDs, shared by every service ForRepository derives,
	// learns the IDs of the repositories opened, for access checks on
	// catalog listings.
	BoundRepo string
	repoIDs   *repoIDs
	conf      *configState // the configuration in effect (configstate.go)
}

// New returns a service for cfg.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Display == nil {
		cfg.Display = LogDisplay{Logger: cfg.Logger}
	}
	if cfg.User == "" {
		cfg.User = localUser()
	}
	if cfg.Worker == "" {
		cfg.Worker = Hostname()
	}
	if cfg.Engine == nil {
		cfg.Engine = &policy.Config{}
	}
	if cfg.Maintenance == nil {
		cfg.Maintenance = &maintenance.Config{}
	}
	if cfg.TaskHistory == 0 {
		cfg.TaskHistory = time.Duration(cfg.Maintenance.WithDefaults().TaskHistory)
	}
	return &Service{Config: cfg, log: cfg.Logger, display: cfg.Display, BoundRepo: DefaultRepository, repoIDs: &repoIDs{m: map[string]string{}}, controlState: &controlState{},
		conf: newConfigState()}
}

// Logger is the service's logger.
func (s *Service) Logger() *slog.Logger { return s.log }

// Hostname names this host as leases and journals record it.
func Hostname() string {
	h, _ := os.Hostname()
	return h
}

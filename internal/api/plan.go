package api

import "time"

// Plan is a policy's predicted run (internal/plan): the configuration as
// it is, then each what-if, side by side.
type Plan struct {
	Policy        string  `json:"policy"`
	Mode          string  `json:"mode"`
	VMs           int     `json:"vms"`
	WindowSeconds float64 `json:"window_seconds"` // 0: no window
	// Window says where the window came from: the option, or the gap
	// between the schedule's next two runs.
	Window    string         `json:"window"`
	Scenarios []PlanScenario `json:"scenarios"`
	// Assumptions are what the plan used where nothing was recorded or
	// measured, with the number of VMs concerned.
	Assumptions []string `json:"assumptions"`
	// Measurements are the device and pipeline measurements used, with
	// host and date.
	Measurements []string `json:"measurements"`
	// P90Basis says what the P90 carries: the planner's record of past
	// runs (Record), or, without enough of it, the recorded task costs'
	// spread alone.
	P90Basis string      `json:"p90_basis"`
	Record   *PlanRecord `json:"record,omitempty"`
	// Concurrency is the recommendation from the recorded runs; absent
	// when they were at fewer than three concurrencies.
	Concurrency *PlanConcurrency `json:"concurrency,omitempty"`
	// Capacity is what the policy's retention holds in its repository,
	// and how the repository grows until then.
	Capacity PlanCapacity `json:"capacity"`
}

// PlanCapacity is the forecast of what a policy's retention holds in its
// repository: the points kept of every VM, simulated over the schedule's
// runs on a calendar (internal/plan/capacity.go).
type PlanCapacity struct {
	Retention string `json:"retention"`
	// Schedule is the policy's, or the cadence assumed without one.
	Schedule   string  `json:"schedule"`
	RunsPerDay float64 `json:"runs_per_day"`
	// The inputs over the VMs: non-zero bytes of their disks, the bytes
	// a run adds before compression, and the bytes stored per byte
	// added (their weighted mean).
	UsedBytes         int64   `json:"used_bytes"`
	ChangePerRunBytes int64   `json:"change_per_run_bytes"`
	Reduction         float64 `json:"reduction"`
	// StartedAt is the first run simulated: the policy's first, or the
	// next one when it has none.
	StartedAt time.Time `json:"started_at"`
	// SteadyAt is when the repository first holds the steady state's
	// low, from which on it swings between low and peak with the
	// calendar; absent when the retention keeps every point.
	SteadyAt *time.Time `json:"steady_at,omitempty"`
	// The steady state: its largest size (data, and the disk maps,
	// pack and index entries), the points each VM then keeps, and its
	// smallest size. Without a steady state, the size a year from now.
	PeakBytes         int64     `json:"peak_bytes"`
	PeakDataBytes     int64     `json:"peak_data_bytes"`
	PeakMetadataBytes int64     `json:"peak_metadata_bytes"`
	PeakAt            time.Time `json:"peak_at"`
	PeakPoints        int       `json:"peak_points"`
	LowBytes          int64     `json:"low_bytes"`
	// NowBytes is the forecast's size at the last run before now.
	NowBytes int64 `json:"now_bytes"`
	// Growth until the steady state (for ever without one), on average
	// from the first run.
	GrowthPerDayBytes   float64 `json:"growth_per_day_bytes"`
	GrowthPerMonthBytes float64 `json:"growth_per_month_bytes"`
	// PackSlackBytes is what packs gc leaves alone may add to the peak:
	// it repacks a pack only past its repack threshold of dead bytes.
	PackSlackBytes int64 `json:"pack_slack_bytes"`
	// Curve is the size over the simulated runs (at most 60, evenly
	// spread).
	Curve []PlanCapacitySample `json:"curve"`
	// Notes say how the simulation ran; Assumptions what it used where
	// a VM's history lacked a figure, with the number of VMs.
	Notes       []string               `json:"notes"`
	Assumptions []string               `json:"assumptions"`
	Repository  PlanRepositoryCapacity `json:"repository"`
}

// PlanCapacitySample is the forecast's size after one run.
type PlanCapacitySample struct {
	At        time.Time `json:"at"`
	SizeBytes int64     `json:"size_bytes"`
}

// PlanRepositoryCapacity is the forecast of every policy writing to the
// repository, against what its store can hold.
type PlanRepositoryCapacity struct {
	Name     string               `json:"name"`
	Policies []PlanPolicyCapacity `json:"policies"`
	// PeakBytes sums the policies' peaks; GrowthPerDayBytes their growth.
	PeakBytes         int64   `json:"peak_bytes"`
	GrowthPerDayBytes float64 `json:"growth_per_day_bytes"`
	// StoredBytes is the newest usage sample the server recorded (0:
	// none); CapacityBytes what the store may hold, FreeBytes what it
	// has left (both -1 when unknown); Capacity says where they came
	// from, or why they are unknown.
	StoredBytes   int64  `json:"stored_bytes"`
	CapacityBytes int64  `json:"capacity_bytes"`
	FreeBytes     int64  `json:"free_bytes"`
	Capacity      string `json:"capacity"`
	// FullAt is when the policies' growth from now fills the free space;
	// absent when it never does or the capacity is unknown. Full says
	// which, in words.
	FullAt *time.Time `json:"full_at,omitempty"`
	Full   string     `json:"full"`
}

// PlanPolicyCapacity is one policy's share of its repository.
type PlanPolicyCapacity struct {
	Policy            string  `json:"policy"`
	VMs               int     `json:"vms"`
	PeakBytes         int64   `json:"peak_bytes"`
	NowBytes          int64   `json:"now_bytes"`
	GrowthPerDayBytes float64 `json:"growth_per_day_bytes"`
	// Error says why the policy could not be forecast (its inventory).
	Error string `json:"error,omitempty"`
}

// PlanScenario is one scenario's prediction.
type PlanScenario struct {
	Name       string  `json:"name"` // "as configured", or the what-if ("tasks=64")
	Runs       int     `json:"runs"` // Monte Carlo runs
	P50Seconds float64 `json:"p50_seconds"`
	P90Seconds float64 `json:"p90_seconds"`
	// SimulatedP90Seconds is the simulation's own P90, before the
	// planner's record widened it (Plan.P90Basis).
	SimulatedP90Seconds float64 `json:"simulated_p90_seconds"`
	// InWindow is the chance to end within the window (0 to 1).
	InWindow   float64 `json:"in_window"`
	Bottleneck string  `json:"bottleneck"`
	// CriticalPathVMs is the number of VM tasks on the critical path;
	// WaitedOn says what they waited for, Work what their time went to.
	CriticalPathVMs int         `json:"critical_path_vms"`
	WaitedOn        []PlanShare `json:"waited_on"`
	Work            []PlanShare `json:"work"`
	Busy            []PlanBusy  `json:"busy"`
	Violations      []string    `json:"violations"`
	// Capacity is what the policy's retention holds under the scenario.
	Capacity PlanScenarioCapacity `json:"capacity"`
}

// PlanScenarioCapacity is the capacity forecast under one scenario: a
// what-if that changes the VMs kept (add-vms) gets a forecast of its
// own, the others have the configured one's (how a run goes does not
// change what is kept).
type PlanScenarioCapacity struct {
	VMs               int     `json:"vms"`
	PeakBytes         int64   `json:"peak_bytes"`
	GrowthPerDayBytes float64 `json:"growth_per_day_bytes"`
	// RepositoryPeakBytes adds the repository's other policies' peaks.
	RepositoryPeakBytes int64 `json:"repository_peak_bytes"`
	// FullAt and Full are the repository's full date under the scenario,
	// as in PlanRepositoryCapacity.
	FullAt *time.Time `json:"full_at,omitempty"`
	Full   string     `json:"full"`
	// Error says why there is no forecast.
	Error string `json:"error,omitempty"`
}

// PlanRecord is the planner's record the P90 was widened by: measured
// time ÷ P50 of past runs of the policy, or of the catalog's when the
// policy has fewer than five. The P90 is the larger of the simulation's
// and P50 × Factor (docs/design/plan.md).
type PlanRecord struct {
	Scope string `json:"scope"` // "policy NAME" or "the catalog (all policies)"
	Runs  int    `json:"runs"`
	// Median is the runs' median ratio: the planner's bias.
	Median float64 `json:"median"`
	// Empirical90 is the ratios' 90th percentile; Bound90 the upper 90%
	// prediction bound of one more run's ratio (Student's t on the logs);
	// Factor the larger.
	Empirical90 float64 `json:"empirical_90"`
	Bound90     float64 `json:"bound_90"`
	Factor      float64 `json:"factor"`
}

// PlanShare is a part of the critical path.
type PlanShare struct {
	What  string  `json:"what"`
	Share float64 `json:"share"`
}

// PlanBusy is a resource's busy time in the median run.
type PlanBusy struct {
	Resource string  `json:"resource"`
	Kind     string  `json:"kind"` // "slots" or "bandwidth"
	Capacity float64 `json:"capacity"`
	Share    float64 `json:"share"`
	// The longest busy stretch, in seconds from the run's start.
	FromSeconds float64 `json:"from_seconds"`
	ToSeconds   float64 `json:"to_seconds"`
}

// PlanConcurrency is the Universal Scalability Law fitted to the
// recorded runs (VMs per second at the concurrency each reached).
type PlanConcurrency struct {
	Points      []PlanPoint `json:"points"`
	Lambda      float64     `json:"lambda"`
	Sigma       float64     `json:"sigma"`
	Kappa       float64     `json:"kappa"`
	Configured  int         `json:"configured"`
	Recommended int         `json:"recommended"` // 0: the runs scale linearly
	Warning     string      `json:"warning"`
}

// PlanPoint is one recorded run.
type PlanPoint struct {
	Concurrency  int     `json:"concurrency"`
	VMsPerSecond float64 `json:"vms_per_second"`
}

// DeviceBench is a device measured by `coffer bench device`.
type DeviceBench struct {
	Device                    string    `json:"device"`
	Path                      string    `json:"path"`
	Host                      string    `json:"host"`
	Time                      time.Time `json:"time"`
	Streams                   int       `json:"streams"`
	SizeBytes                 int64     `json:"size_bytes"`
	ReadBytesPerSecond        float64   `json:"read_bytes_per_second"`
	WriteBytesPerSecond       float64   `json:"write_bytes_per_second"`
	DuplexReadBytesPerSecond  float64   `json:"duplex_read_bytes_per_second"`
	DuplexWriteBytesPerSecond float64   `json:"duplex_write_bytes_per_second"`
}

// PipelineBench is coffer's pipeline measured by `coffer bench pipeline`.
type PipelineBench struct {
	Host   string          `json:"host"`
	Time   time.Time       `json:"time"`
	Levels []PipelineLevel `json:"levels"`
}

// PipelineLevel is the pipeline at one zstd level (0: no compression).
type PipelineLevel struct {
	Level                 int     `json:"level"`
	Workers               int     `json:"workers"`
	RateBytesPerSecond    float64 `json:"rate_bytes_per_second"`
	PerCoreBytesPerSecond float64 `json:"per_core_bytes_per_second"`
	StoredRatio           float64 `json:"stored_ratio"`
}

// DeviceBenchRequest asks the server to measure a device of its host.
type DeviceBenchRequest struct {
	Path      string `json:"path" minLength:"1" maxLength:"4096" doc:"a directory on the device; two files of size_bytes are written there and removed"`
	Device    string `json:"device,omitempty" maxLength:"512" doc:"the name the planner knows it by: datastore:CONNECTION/DATASTORE or repo:REPOSITORY"`
	SizeBytes int64  `json:"size_bytes,omitempty" minimum:"0" maximum:"68719476736" doc:"bytes each pass moves (0: 256 MiB; at most 64 GiB, and two files of it must take at most half the free space)"`
	Streams   int    `json:"streams,omitempty" minimum:"0" maximum:"256" doc:"concurrent sequential streams (0: 4)"`
}

// PipelineBenchRequest asks the server to measure coffer's pipeline on
// its host.
type PipelineBenchRequest struct {
	Levels    []int `json:"levels" maxItems:"20" doc:"zstd levels, 0 for none (empty: 0, 1, 3 and 9)"`
	SizeBytes int64 `json:"size_bytes,omitempty" minimum:"0" maximum:"1099511627776" doc:"bytes each level processes (0: 512 MiB; at most 1 TiB)"`
	Workers   int   `json:"workers,omitempty" minimum:"0" maximum:"1024" doc:"goroutines (0: one per core; at most 4 per core of the host that measures)"`
}

// PlanAccuracy sets the predictions recorded as a policy's runs started
// beside what happened.
type PlanAccuracy struct {
	Policy string         `json:"policy"`
	Runs   []PlanBacktest `json:"runs"` // newest first
	// MeanAbsError is the mean of |measured/P50 − 1|, Bias the mean of
	// measured/P50 − 1 (positive: runs took longer than predicted), and
	// WithinP90 the share of runs that ended within their P90.
	MeanAbsError float64 `json:"mean_abs_error"`
	Bias         float64 `json:"bias"`
	WithinP90    float64 `json:"within_p90"`
}

// PlanAccuracies is the planner's record for every policy, each over its
// own last runs (the dashboard's panel).
type PlanAccuracies struct {
	// Policies are those with a predicted run, by name.
	Policies []PlanAccuracy `json:"policies"`
	// Unpredicted names the policies with no run recorded with a
	// prediction yet.
	Unpredicted []string `json:"unpredicted"`
}

// PlanBacktest is one run: its prediction and its duration, from its
// first VM's start to its last VM's end.
type PlanBacktest struct {
	JobID           int64     `json:"job_id"`
	Started         time.Time `json:"started"`
	VMs             int       `json:"vms"`
	P50Seconds      float64   `json:"p50_seconds"`
	P90Seconds      float64   `json:"p90_seconds"`
	MeasuredSeconds float64   `json:"measured_seconds"`
	Error           float64   `json:"error"` // measured/P50 − 1
}

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
	// Concurrency is the recommendation from the recorded runs; absent
	// when they were at fewer than three concurrencies.
	Concurrency *PlanConcurrency `json:"concurrency,omitempty"`
}

// PlanScenario is one scenario's prediction.
type PlanScenario struct {
	Name       string  `json:"name"` // "as configured", or the what-if ("tasks=64")
	Runs       int     `json:"runs"` // Monte Carlo runs
	P50Seconds float64 `json:"p50_seconds"`
	P90Seconds float64 `json:"p90_seconds"`
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
	Workers   int   `json:"workers,omitempty" minimum:"0" maximum:"1024" doc:"goroutines (0: one per core)"`
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

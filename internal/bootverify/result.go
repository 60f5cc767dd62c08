// Package bootverify proves that a backup point boots: its VM is started
// from the repository through instant recovery's path (disks served over
// NBD, a throw-away overlay taking every write), isolated from every
// network, and put through a ladder of checks, each with its result,
// timing and evidence. Nothing is written to the repository or to the
// production VM; everything the run creates is journalled under the state
// directory and removed at its end, or by Cleanup after coffer was killed.
package bootverify

import (
	"encoding/json"
	"time"
)

// The ladder's steps, in order.
const (
	StepStart      = 1 // QEMU starts the VM
	StepNoPanic    = 2 // no GUEST_PANICKED, no boot loop (RESET events), no shutdown
	StepConsole    = 3 // the console marker appears
	StepAgent      = 4 // the guest agent answers
	StepProbes     = 5 // TCP, HTTP and guest-agent command probes
	StepScreenshot = 6 // the screen is not blank
)

var stepNames = map[int]string{StepStart: "vm-starts", StepNoPanic: "no-panic", StepConsole: "console-marker",
	StepAgent: "guest-agent", StepProbes: "probes", StepScreenshot: "screenshot"}

// Step results.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped" // not applicable (no guest agent), or after an earlier failure
)

// Result is a verification's verdict with its evidence. It is what the
// repository keeps beside the point (JSON), so that it outlives the
// catalog and needs no change to a locked point.
type Result struct {
	PointID  string        `json:"point_id"`
	VM       string        `json:"vm"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Passed   bool          `json:"passed"`
	// FailedStep is the first step that failed (0 when all passed).
	FailedStep int `json:"failed_step,omitempty"`
	// CannotVerify says why the point cannot be booted here as its own
	// hypervisor boots it (a vSphere guest that needs a device QEMU does
	// not emulate): step 1 failed without saying anything of the point.
	CannotVerify string `json:"cannot_verify_locally,omitempty"`
	Steps        []Step `json:"steps"`
	// Screenshot is the screen at the end of the ladder (PNG), also after
	// a failure, when QEMU still ran.
	Screenshot  []byte `json:"screenshot_png,omitempty"`
	ConsoleTail string `json:"console_tail"`
	// Review says why a person should look at the screenshot although
	// the ladder passed (a large change against the last verified one).
	Review string `json:"review,omitempty"`
}

// Step is one rung of the ladder.
type Step struct {
	Number   int               `json:"number"`
	Name     string            `json:"name"`
	Status   string            `json:"status"`
	Duration time.Duration     `json:"duration_ns"`
	Detail   string            `json:"detail,omitempty"`
	Evidence map[string]string `json:"evidence,omitempty"`
}

// Step returns step n of the result.
func (r *Result) Step(n int) *Step {
	for i := range r.Steps {
		if r.Steps[i].Number == n {
			return &r.Steps[i]
		}
	}
	return nil
}

// Encode is the result as the repository stores it.
func (r *Result) Encode() ([]byte, error) { return json.Marshal(r) }

// Decode reads a stored result.
func Decode(b []byte) (*Result, error) {
	var r Result
	return &r, json.Unmarshal(b, &r)
}

// settle computes the verdict from the steps.
func (r *Result) settle() {
	r.Passed, r.FailedStep = true, 0
	for _, s := range r.Steps {
		if s.Status == Failed {
			r.Passed, r.FailedStep = false, s.Number
			return
		}
	}
}

// consoleTailBytes bounds the console kept as evidence.
const consoleTailBytes = 4 << 10

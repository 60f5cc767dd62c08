package api

import "time"

// BootVerification is a boot verification of a backup point: `coffer
// verify boot --json` prints it, and the repository keeps it beside the
// point.
type BootVerification struct {
	PointID         string    `json:"point_id"`
	VM              string    `json:"vm"`
	Started         time.Time `json:"started"`
	DurationSeconds float64   `json:"duration_seconds"`
	Passed          bool      `json:"passed"`
	// FailedStep is the first step that failed (absent when all passed).
	FailedStep int `json:"failed_step,omitempty"`
	// CannotVerify says why the point cannot boot on this host as its
	// own hypervisor boots it (a vSphere guest that needs a device QEMU
	// does not emulate): step 1 failed, and that says nothing of the
	// point.
	CannotVerify string     `json:"cannot_verify_locally,omitempty"`
	Steps        []BootStep `json:"steps"`
	// ScreenshotPNG is the screen at the end of the ladder (base64 in
	// JSON), also after a failure.
	ScreenshotPNG []byte `json:"screenshot_png,omitempty"`
	// ScreenshotFile is where --screenshot wrote it.
	ScreenshotFile string `json:"screenshot_file,omitempty"`
	ConsoleTail    string `json:"console_tail"`
	// Review says why a person should look at the screenshot although
	// every step passed: it differs much from the VM's last verified one.
	Review string `json:"review,omitempty"`
}

// BootStep is one check of the ladder: 1 vm-starts, 2 no-panic,
// 3 console-marker, 4 guest-agent, 5 probes, 6 screenshot.
type BootStep struct {
	Number          int               `json:"number"`
	Name            string            `json:"name"`
	Status          string            `json:"status"` // passed, failed, skipped
	DurationSeconds float64           `json:"duration_seconds"`
	Detail          string            `json:"detail,omitempty"`
	Evidence        map[string]string `json:"evidence"`
}

// BootSummary is a point's last boot verification in point listings.
type BootSummary struct {
	Passed     bool      `json:"passed"`
	FailedStep int       `json:"failed_step,omitempty"`
	Time       time.Time `json:"time"`
	// CannotVerify: the point cannot boot on the verifying host (see
	// BootVerification).
	CannotVerify string `json:"cannot_verify_locally,omitempty"`
}

// BootVerificationEntry is a stored boot verification in a repository's
// listing: its verdict, without the steps' evidence and the screenshot
// (get-boot-verification returns them).
type BootVerificationEntry struct {
	PointID         string    `json:"point_id"`
	VM              string    `json:"vm"`
	Started         time.Time `json:"started"`
	DurationSeconds float64   `json:"duration_seconds"`
	Passed          bool      `json:"passed"`
	FailedStep      int       `json:"failed_step,omitempty"`
	// FailedStepName names the failed step (console-marker).
	FailedStepName string `json:"failed_step_name,omitempty"`
	CannotVerify   string `json:"cannot_verify_locally,omitempty"`
	Review         string `json:"review,omitempty"`
	// Screenshot: a screenshot is stored with the result.
	Screenshot bool `json:"screenshot"`
}

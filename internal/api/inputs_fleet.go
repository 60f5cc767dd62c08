package api

import "time"

// The inputs of the operations on jobs, the VM inventory, policies, the
// planner and its measurements (see inputs.go).

// PolicyParam names the policy an operation works on.
type PolicyParam struct {
	Policy string `path:"policy" maxLength:"255" example:"nightly"`
}

// PlanPolicyInput predicts a run of a policy and its what-ifs.
type PlanPolicyInput struct {
	PolicyParam
	WhatIf        []string `query:"what_if,explode" required:"false" maxItems:"20" doc:"a variation to predict beside the configuration, KEY=VALUE: tasks=64, per-datastore=12, per-host=4, group:NAME=6, streams=+1, multiplexing=2, add-vms=100, move=GLOB:DATASTORE (repeat the parameter)"`
	Mode          string   `query:"mode" enum:"full,incremental,differential," doc:"the run to plan (default: the policy's mode)"`
	WindowSeconds float64  `query:"window_seconds" minimum:"0" maximum:"31622400" doc:"the time the run must end within (0: the gap between the schedule's next two runs)"`
	Runs          int      `query:"runs" minimum:"0" maximum:"10000" doc:"Monte Carlo runs (0: 100, fewer for fleets over 2,000 VMs, down to 20 at 10,000)"`
	Jobs          int      `query:"jobs" minimum:"0" maximum:"1000" doc:"recorded runs of the policy to learn from (0: 20)"`
	QueueDepth    int      `query:"queue_depth" minimum:"0" maximum:"1000000" doc:"every datastore's queue depth, for the VMs-per-volume rule (with commands_per_vm)"`
	CommandsPerVM float64  `query:"commands_per_vm" minimum:"0" maximum:"1000000" doc:"active commands per VM, for the VMs-per-volume rule"`
}

// Window is the time the run must end within (0: the gap between the
// schedule's next two runs).
func (in *PlanPolicyInput) Window() time.Duration {
	return time.Duration(in.WindowSeconds * float64(time.Second))
}

// PlanAccuracyInput sets a policy's last predictions beside its runs.
type PlanAccuracyInput struct {
	PolicyParam
	Runs int `query:"runs" minimum:"0" maximum:"1000" doc:"the last runs to judge (0: 20)"`
}

// PlanAccuraciesInput is PlanAccuracyInput for every policy.
type PlanAccuraciesInput struct {
	Runs int `query:"runs" minimum:"0" maximum:"1000" doc:"the last runs of each policy to judge (0: 20)"`
}

// BenchDeviceInput measures a device of the host.
type BenchDeviceInput struct {
	Body DeviceBenchRequest
}

// BenchPipelineInput measures coffer's pipeline on the host.
type BenchPipelineInput struct {
	Body PipelineBenchRequest
}

// StartBenchPipelineInput measures coffer's pipeline on the host as a
// task, answered at once with the running task.
type StartBenchPipelineInput struct {
	Body PipelineBenchRequest
}

// JobParam names the job an operation works on.
type JobParam struct {
	ID int64 `path:"id" minimum:"1"`
}

// ListJobsInput lists a page of jobs, newest first.
type ListJobsInput struct {
	Policy string    `query:"policy" maxLength:"255"`
	Kind   string    `query:"kind" maxLength:"64" doc:"backup-policy, backup-vm, restore, verify, gc, ..."`
	User   string    `query:"user" maxLength:"64"`
	VM     string    `query:"vm" maxLength:"255" doc:"a VM's name or ID"`
	Status string    `query:"status" enum:"queued,running,success,partial,failed,cancelled"`
	Since  time.Time `query:"since" doc:"jobs created at or after this time"`
	Until  time.Time `query:"until" doc:"jobs created before this time"`
	Limit  int       `query:"limit" minimum:"0" maximum:"1000" doc:"the page's size, newest first (0: 100)"`
	After  int64     `query:"after" minimum:"0" doc:"the Coffer-Next header of the previous page: this page continues after it"`
}

// GetJobInput asks for a job with a page of its tasks and the first
// lines of its log.
type GetJobInput struct {
	JobParam
	Tasks      int   `query:"tasks" minimum:"0" maximum:"1000" doc:"the most per-VM tasks in the document, in the order they were created (0: 100)"`
	TasksAfter int64 `query:"tasks_after" minimum:"0" doc:"the Coffer-Next header of the previous answer: the tasks after it"`
	Log        int   `query:"log" minimum:"0" maximum:"1000" doc:"the most lines of the log from its start (0: 100); job-log pages through the rest"`
}

// JobLogInput asks for a page of a job's log.
type JobLogInput struct {
	JobParam
	Start int64 `query:"start" minimum:"0" doc:"the last line already read (0: from the first)"`
	Limit int   `query:"limit" minimum:"0" maximum:"10000" doc:"the most lines (0: 500)"`
}

// FollowJobInput follows a job's events from a line of its log on.
type FollowJobInput struct {
	JobParam
	After int64 `query:"after" minimum:"0" doc:"the last log line already read (the Last-Event-ID header says the same)"`
}

// CancelJobInput asks a job to stop.
type CancelJobInput struct {
	JobParam
}

// RefreshInventoryInput names the connection whose VMs to list now.
type RefreshInventoryInput struct {
	Connection string `path:"conn" maxLength:"255" example:"vcenter"`
}

// CheckPoliciesInput validates the policies.
type CheckPoliciesInput struct {
	Offline bool `query:"offline" doc:"check without asking the hypervisors"`
}

// PreviewPolicyInput says what a run of a policy would do now.
type PreviewPolicyInput struct {
	PolicyParam
	Runs int `query:"runs" minimum:"0" maximum:"1000" default:"5" doc:"how many next runs to show"`
}

// PreviewPolicyDraftInput is PreviewPolicyInput for a policy not saved
// yet.
type PreviewPolicyDraftInput struct {
	Runs int            `query:"runs" minimum:"0" maximum:"1000" default:"5" doc:"how many next runs to show"`
	Body map[string]any `doc:"the policy not saved yet, in the configuration file's schema (one entry of its policies section)"`
}

// BackupPolicyInput runs a policy now.
type BackupPolicyInput struct {
	PolicyParam
	Wait bool `query:"wait" doc:"answer when the run has ended, with the finished job (default: at once, with the running job)"`
}

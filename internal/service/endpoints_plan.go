package service

import (
	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
)

// The endpoints of the planner and of the measurements it uses.

type planIn struct {
	Policy        string   `path:"policy" maxLength:"255" example:"nightly"`
	WhatIf        []string `query:"what_if,explode" required:"false" maxItems:"20" doc:"a variation to predict beside the configuration, KEY=VALUE: tasks=64, per-datastore=12, per-host=4, group:NAME=6, streams=+1, multiplexing=2, add-vms=100, move=GLOB:DATASTORE (repeat the parameter)"`
	Mode          string   `query:"mode" enum:"full,incremental,differential," doc:"the run to plan (default: the policy's mode)"`
	WindowSeconds float64  `query:"window_seconds" minimum:"0" maximum:"31622400" doc:"the time the run must end within (0: the gap between the schedule's next two runs)"`
	Runs          int      `query:"runs" minimum:"0" maximum:"10000" doc:"Monte Carlo runs (0: 100, fewer for fleets over 2,000 VMs, down to 20 at 10,000)"`
	Jobs          int      `query:"jobs" minimum:"0" maximum:"1000" doc:"recorded runs of the policy to learn from (0: 20)"`
	QueueDepth    int      `query:"queue_depth" minimum:"0" maximum:"1000000" doc:"every datastore's queue depth, for the VMs-per-volume rule (with commands_per_vm)"`
	CommandsPerVM float64  `query:"commands_per_vm" minimum:"0" maximum:"1000000" doc:"active commands per VM, for the VMs-per-volume rule"`
}

func epPlan(ctx context.Context, s *Service, in *planIn) (*Result[*api.Plan], error) {
	return result(s.Plan(ctx, PlanInput{Policy: in.Policy, WhatIf: in.WhatIf, Mode: in.Mode, Window: time.Duration(in.WindowSeconds * float64(time.Second)),
		Runs: in.Runs, Jobs: in.Jobs, QueueDepth: in.QueueDepth, CommandsPerVM: in.CommandsPerVM}))
}

type planAccuracyIn struct {
	Policy string `path:"policy" maxLength:"255" example:"nightly"`
	Runs   int    `query:"runs" minimum:"0" maximum:"1000" doc:"the last runs to judge (0: 20)"`
}

func epPlanAccuracy(ctx context.Context, s *Service, in *planAccuracyIn) (*Result[*api.PlanAccuracy], error) {
	return result(s.PlanAccuracy(ctx, in.Policy, in.Runs))
}

type planAccuraciesIn struct {
	Runs int `query:"runs" minimum:"0" maximum:"1000" doc:"the last runs of each policy to judge (0: 20)"`
}

func epPlanAccuracies(ctx context.Context, s *Service, in *planAccuraciesIn) (*Result[*api.PlanAccuracies], error) {
	return result(s.PlanAccuracies(ctx, in.Runs))
}

type benchDeviceIn struct {
	Body api.DeviceBenchRequest
}

func epBenchDevice(ctx context.Context, s *Service, in *benchDeviceIn) (*Result[*api.DeviceBench], error) {
	b := in.Body
	return result(s.BenchDevice(ctx, BenchDeviceInput{Path: b.Path, Device: b.Device, Size: b.SizeBytes, Streams: b.Streams}))
}

type benchPipelineIn struct {
	Body api.PipelineBenchRequest
}

func epBenchPipeline(ctx context.Context, s *Service, in *benchPipelineIn) (*Result[*api.PipelineBench], error) {
	b := in.Body
	return result(s.BenchPipeline(ctx, BenchPipelineInput{Levels: b.Levels, Bytes: b.SizeBytes, Workers: b.Workers}))
}

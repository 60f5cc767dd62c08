package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"log/slog"
	"regexp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service/apidoc"
)

// VerifyBoot boots a QEMU or vSphere backup point from the default
// repository under QEMU, isolated and on a throw-away overlay, runs the
// ladder of checks and stores the result in the repository beside the
// point. A point that did not pass returns its result and an error naming
// the failed step; one that cannot boot here as its hypervisor boots it
// (a vSphere guest that needs a device QEMU does not emulate) returns its
// result and an invalid-request error saying why. The point is a backup
// point (ID or prefix), "latest", or a VM's name (its newest point).
func (s Ops) VerifyBoot(ctx context.Context, call *api.VerifyBootInput) (*api.BootVerification, error) {
	in := call.Body
	target := call.Point
	spec := service.WithDetail(s.NamedJob(job.KindVerifyBoot, call.Repo), "boot verification of "+target)
	if err := s.toBootWorker(ctx, &call.WorkerParam, call.Repo); err != nil {
		return nil, err
	}
	if out, remote, err := service.OnWorker[*api.BootVerification](ctx, s.Service, "verify-boot", &call.WorkerParam, call, spec); remote {
		return out, err
	}
	if target == "" {
		return nil, service.Invalidf("name the backup point to boot: a point ID, a VM's name, or latest")
	}
	if in.Marker != "" {
		if _, err := regexp.Compile(in.Marker); err != nil {
			return nil, service.Invalidf("the console marker is not a regular expression: %v", err)
		}
	}
	o := bootverify.Options{StateDir: s.Config.StateDir, Timeout: in.Timeout(), Marker: in.Marker, ProbeTimeout: in.ProbeTimeout(), Log: s.Logger()}
	for _, p := range in.Probes {
		pr, err := bootverify.ParseProbe(p)
		if err != nil {
			return nil, service.Invalidf("%v", err)
		}
		o.Probes = append(o.Probes, pr)
	}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.BootVerification, error) {
		release, err := s.BootSlot(ctx, t)
		if err != nil {
			return nil, err
		}
		defer release()
		// What a killed coffer left of earlier verifications goes first.
		left, err := bootverify.Cleanup(ctx, s.Config.StateDir)
		for _, l := range left {
			t.Log(slog.LevelWarn, "removed a leftover of an interrupted boot verification", "point", l.Point, "kind", l.Kind, "name", l.Name, "action", l.Action)
		}
		if err != nil {
			t.Log(slog.LevelWarn, "cleanup of interrupted boot verifications failed", "err", err)
		}
		return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.RestoreLease("boot verification of "+target), func(r *repo.Repository) (*api.BootVerification, error) {
			snap, err := bootverify.ResolvePoint(ctx, r, target)
			if err != nil {
				return nil, err
			}
			t.Log(slog.LevelInfo, "booting a backup point to verify it", "point", snap.ID.String(), "vm", snap.Source.VMName)
			o.Reference, o.ReferencePoint, err = bootverify.LastVerifiedScreen(ctx, r, snap.Source.VMName)
			if err != nil {
				t.Log(slog.LevelWarn, "the last verified screenshot was not read: the screen is not compared", "err", err)
			}
			res, err := bootverify.Run(ctx, r, snap, o)
			if err != nil {
				return nil, err
			}
			b, err := res.Encode()
			if err != nil {
				return nil, err
			}
			if err := r.PutBootVerification(ctx, snap.ID, b); err != nil {
				return nil, err
			}
			doc := apidoc.BootVerification(res)
			if res.CannotVerify != "" {
				// Not a point that does not boot: one this host cannot boot as
				// its hypervisor does. The request cannot be served here.
				return doc, api.Errorf(api.Invalid, "backup point %s of %s: cannot verify locally: %s", snap.ID.Short(), res.VM, res.CannotVerify)
			}
			if !res.Passed {
				st := res.Step(res.FailedStep)
				return doc, api.Errorf(api.Integrity, "backup point %s of %s did not pass boot verification: step %d (%s) failed: %s",
					snap.ID.Short(), res.VM, st.Number, st.Name, st.Detail)
			}
			t.Log(slog.LevelInfo, "the backup point boots", "point", snap.ID.String(), "seconds", res.Duration.Seconds())
			if res.Review != "" {
				t.Log(slog.LevelWarn, "look at the screenshot: "+res.Review, "point", snap.ID.String())
			}
			return doc, nil
		})
	})
}

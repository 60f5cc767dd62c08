package bootops

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"
)

// BootVerifications lists the results the repository keeps beside its
// points, newest first (in.VM: that VM's only): their verdicts without
// the evidence, which BootVerification returns.
func (s Ops) BootVerifications(ctx context.Context, in *api.ListBootVerificationsInput) ([]api.BootVerificationEntry, error) {
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) ([]api.BootVerificationEntry, error) {
		all, err := bootverify.All(ctx, r)
		if err != nil {
			return nil, err
		}
		out := []api.BootVerificationEntry{}
		for _, res := range all {
			if in.VM != "" && res.VM != in.VM {
				continue
			}
			e := api.BootVerificationEntry{PointID: res.PointID, VM: res.VM, Started: res.Started, DurationSeconds: res.Duration.Seconds(),
				Passed: res.Passed, FailedStep: res.FailedStep, CannotVerify: res.CannotVerify, Review: res.Review, Screenshot: len(res.Screenshot) > 0}
			if st := res.Step(res.FailedStep); st != nil {
				e.FailedStepName = st.Name
			}
			out = append(out, e)
		}
		return out, nil
	})
}

// BootVerification is the result the repository keeps for a point: the
// ladder, each step's evidence, the console's tail and the screenshot.
// The point is named as verify-boot names it (an ID, a prefix, latest, a
// VM's name); a point never verified is not found.
func (s Ops) BootVerification(ctx context.Context, in *api.BootVerificationInput) (*api.BootVerification, error) {
	res, err := s.stored(ctx, in.Point)
	if err != nil {
		return nil, err
	}
	return apidoc.BootVerification(res), nil
}

// BootScreenshot is the PNG of a point's stored result; not found when
// the point was never verified or QEMU gave no screen.
func (s Ops) BootScreenshot(ctx context.Context, in *api.BootScreenshotInput) ([]byte, error) {
	res, err := s.stored(ctx, in.Point)
	if err != nil {
		return nil, err
	}
	if len(res.Screenshot) == 0 {
		return nil, api.Errorf(api.NotFound, "the boot verification of backup point %s of %s has no screenshot: QEMU gave no screen", shortID(res.PointID), res.VM)
	}
	return res.Screenshot, nil
}

func (s Ops) stored(ctx context.Context, point string) (*bootverify.Result, error) {
	if point == "" {
		return nil, service.Invalidf("name the backup point: a point ID, a VM's name, or latest")
	}
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*bootverify.Result, error) {
		res, err := bootverify.Stored(ctx, r, point)
		if errors.Is(err, bootverify.ErrNotVerified) {
			return nil, api.Errorf(api.NotFound, "%v", err)
		}
		return res, err
	})
}

func screenshotFile(in *api.BootScreenshotInput) (string, string) {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, in.Point)
	return "image/png", "coffer-boot-" + name + ".png"
}

// epScreenshot answers the screenshot's bytes.
func epScreenshot(ctx context.Context, svc *service.Service, in *api.BootScreenshotInput, w io.Writer) error {
	png, err := Ops{svc}.BootScreenshot(ctx, in)
	if err != nil {
		return err
	}
	_, err = w.Write(png)
	return err
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

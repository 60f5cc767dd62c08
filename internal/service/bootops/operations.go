package bootops

import (
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// readResult is reading a point's stored result: auditing the repository,
// or the point's VM (a tenant reads its VMs' verdicts in a shared
// repository).
var readResult = []service.Requirement{{Privilege: auth.RepoAudit, Object: service.OnRepo, Reach: service.ThroughVM}}

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "list-boot-verifications", Method: "BootVerifications", Summary: "list the boot verifications a repository keeps: each point's last verdict, newest first",
		HTTP: service.Get, Path: "/repositories/{repo}/boot-verifications", Requires: service.Require(auth.RepoAudit, service.OnRepo),
		Endpoint: service.Returns(Ops.BootVerifications)},
	{ID: "get-boot-verification", Method: "BootVerification", Summary: "a backup point's last boot verification: the ladder, each step's evidence, the console's tail and the screenshot",
		HTTP: service.Get, Path: "/repositories/{repo}/points/{point}/boot-verification", Requires: readResult,
		Endpoint: service.Returns(Ops.BootVerification)},
	{ID: "get-boot-screenshot", Method: "BootScreenshot", Summary: "the screenshot of a backup point's last boot verification, as a PNG image",
		HTTP: service.Get, Path: "/repositories/{repo}/points/{point}/boot-verification/screenshot", Requires: readResult,
		NotOnCommandLine: "an image for a browser: `coffer verify boot show --screenshot FILE` writes it from get-boot-verification's document",
		Endpoint:         service.Download[api.BootScreenshotInput]{Types: []string{"image/png"}, File: screenshotFile, Run: epScreenshot}},
}

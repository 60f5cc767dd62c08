package planops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "check-policies", Method: "PolicyCheck", Summary: "validate the policies and say what each will do", HTTP: service.Get,
		Path: "/policies/check", Requires: service.Require(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: service.Returns(Ops.PolicyCheck)},
	{ID: "preview-policy", Method: "PolicyPreview", Summary: "what a policy run would select, when it runs next, what its retention keeps",
		HTTP: service.Get, Path: "/policies/{policy}/preview", Requires: service.Require(auth.PolicyAudit, service.OnPolicy),
		Endpoint: service.Returns(Ops.PolicyPreview)},
	{ID: "preview-policy-draft", Method: "PolicyDraftPreview", Summary: "what a policy not saved yet would select, when it would run, what its retention would keep",
		HTTP: service.Post, Path: "/policies/preview", Requires: service.Require(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: service.Returns(Ops.PolicyDraftPreview)},
	{ID: "plan-policy", Method: "Plan", Summary: "predict a policy's run (P50 and P90 windows, critical path, bottleneck, rule violations) beside what-ifs",
		HTTP: service.Get, Path: "/policies/{policy}/plan", Requires: service.Require(auth.PolicyAudit, service.OnPolicy),
		Endpoint: service.Returns(Ops.Plan)},
	{ID: "plan-accuracy", Method: "PlanAccuracy", Summary: "set the predictions a policy's last runs recorded as they started beside what happened",
		HTTP: service.Get, Path: "/policies/{policy}/plan/accuracy", Requires: service.Require(auth.PolicyAudit, service.OnPolicy),
		NoConsole: "the dashboard shows the planner's accuracy over every policy (plan-accuracies); one policy's is `coffer plan accuracy`",
		Endpoint:  service.Returns(Ops.PlanAccuracy)},
	{ID: "plan-accuracies", Method: "PlanAccuracies", Summary: "the planner's record for every policy: each one's error, bias and share within P90 over its last runs (the dashboard's)",
		HTTP: service.Get, Path: "/policies/plan/accuracy", Requires: service.Require(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: service.Returns(Ops.PlanAccuracies)},
}

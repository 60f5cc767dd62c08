package console

// route is a page or an action of the console: its pattern on the
// server's mux, the operations of the API it calls (api.Routes: the only
// ones its handler may call, caller refuses others), and the handler.
// Every route names at least one operation, and a test holds every name
// to the API's: the console can do nothing the API cannot.
type route struct {
	Pattern string
	Ops     []string
	Handle  func(*page)
}

func ops(ids ...string) []string { return ids }

// pg are the operations of a full page, which names the caller in its
// header (whoami).
func pg(ids ...string) []string { return append(ids, "whoami") }

// routes are the console's pages and actions: its own and those of
// package actions.
func (c *Console) routes() []route {
	return append(append(workRoutes(), adminRoutes()...), actionRoutes()...)
}

// workRoutes are the pages and actions of the daily work: backups,
// restores, inventory, repositories, workers, media.
func workRoutes() []route {
	return []route{
		// Signing in and out, and the first run.
		{"GET /ui/login", ops("login", "whoami"), (*page).loginPage},
		{"POST /ui/login", ops("login"), (*page).login},
		// The second step's page script asks the API for a security key's
		// challenge (begin-security-key-sign-in) before the form is sent.
		{"GET /ui/login/second-factor", ops("whoami", "second-factors", "begin-security-key-sign-in"), (*page).secondStepPage},
		{"POST /ui/login/second-factor", ops("whoami", "second-factors", "verify-second-factor", "verify-security-key"), (*page).secondStep},
		{"POST /ui/logout", ops("logout"), (*page).logout},
		{"GET /ui/setup", ops("complete-setup"), (*page).setupPage},
		{"POST /ui/setup", ops("complete-setup", "login"), (*page).setup},

		// The dashboard.
		{"GET /ui/{$}", pg("protection-summary", "list-jobs", "check-policies"), (*page).dashboard},
		{"GET /ui/dashboard/repositories", ops("stats", "repository-usage"), (*page).dashboardRepos},
		{"GET /ui/dashboard/planner", ops("plan-accuracies"), (*page).dashboardPlanner},

		// Tasks.
		{"GET /ui/tasks", pg("list-jobs"), (*page).tasks},
		{"GET /ui/tasks/{id}", pg("get-job", "job-log"), (*page).task},
		{"GET /ui/tasks/{id}/events", ops("follow-job"), (*page).taskEvents},
		{"GET /ui/tasks/{id}/log", ops("job-log"), (*page).taskLog},
		{"POST /ui/tasks/{id}/cancel", ops("cancel-job"), (*page).cancelTask},

		// Backup points: repository, VM, point; and the file browser.
		{"GET /ui/points", pg("list-catalog-points"), (*page).repository},
		{"GET /ui/points/{repo}", pg("list-catalog-points"), (*page).repository},
		{"GET /ui/points/{repo}/vm/{vm}", pg("list-catalog-points"), (*page).vmPoints},
		{"POST /ui/points/{repo}/vm/{vm}/forget", ops("forget"), (*page).forgetVM},
		{"GET /ui/points/{repo}/p/{point}", pg("list-points", "list-media-libraries"), (*page).pointPage},
		{"POST /ui/points/{repo}/p/{point}/protect", ops("protect"), (*page).protectPoint},

		// Boot verification: run one, read the kept results.
		{"POST /ui/points/{repo}/p/{point}/verify-boot", ops("verify-boot"), (*page).verifyBoot},
		{"GET /ui/points/{repo}/p/{point}/boot", pg("list-points", "get-boot-verification"), (*page).bootPage},
		{"GET /ui/points/{repo}/p/{point}/boot/screenshot", ops("get-boot-screenshot"), (*page).bootScreenshot},
		{"GET /ui/points/{repo}/boot", pg("list-boot-verifications"), (*page).bootList},
		{"GET /ui/points/{repo}/p/{point}/files", pg("files-volumes", "files-list", "files-find"), (*page).files},
		{"GET /ui/points/{repo}/p/{point}/download", ops("files-archive"), (*page).download},
		{"GET /ui/points/{repo}/p/{point}/archive", ops("files-archive"), (*page).archive},

		// Restore: a point's wizard, and instant recoveries.
		{"GET /ui/points/{repo}/p/{point}/restore", pg("list-points", "list-connections", "restore-vm"), (*page).restoreWizard},
		{"POST /ui/points/{repo}/p/{point}/restore/vm", ops("restore-vm"), (*page).restoreVM},
		{"POST /ui/points/{repo}/p/{point}/restore/disk", ops("restore-disk"), (*page).restoreDisk},
		{"POST /ui/points/{repo}/p/{point}/restore/instant", ops("instant-start"), (*page).instantStart},
		{"GET /ui/restore", pg("instant-list", "list-storage-snapshots"), (*page).restorePage},
		{"POST /ui/storage-snapshots/{label}/restore", ops("restore-storage-snapshot"), (*page).restoreFromStorage},
		{"POST /ui/storage-snapshots/{label}/forget", ops("forget-storage-snapshot"), (*page).forgetStorageSnapshot},
		{"POST /ui/restore/{session}/commit", ops("instant-commit"), (*page).instantCommit},
		{"POST /ui/restore/{session}/discard", ops("instant-discard"), (*page).instantDiscard},

		// Inventory, policies, repositories.
		{"GET /ui/inventory", pg("list-vms"), (*page).inventory},
		{"POST /ui/inventory/{conn}/refresh", ops("refresh-inventory"), (*page).refreshInventory},
		{"GET /ui/connections", pg(configOps(connectionKinds, "list")...), (*page).connections},
		{"GET /ui/policies", pg("check-policies"), (*page).policies},
		{"GET /ui/policies/{policy}", pg("preview-policy", "get-policy"), (*page).policy},
		{"POST /ui/policies/{policy}/run", ops("backup-policy"), (*page).runPolicy},
		{"GET /ui/policies/{policy}/plan", pg("plan-policy"), (*page).planPage},
		{"GET /ui/new-policy", pg("list-connections"), (*page).policyEditor},
		{"GET /ui/policies/{policy}/edit", pg("get-policy", "list-connections"), (*page).policyEditor},
		{"POST /ui/policies/draft", ops("get-policy", "preview-policy-draft"), (*page).policyDraft},
		{"POST /ui/policies/save", ops("get-policy", "create-policy", "update-policy"), (*page).savePolicy},
		{"GET /ui/repositories", pg("stats", "repository-usage", "list-leases", "list-keys", "list-jobs", "list-repositories"), (*page).repositories},
		{"POST /ui/repositories/{repo}/verify", ops("verify"), (*page).verifyRepository},
		{"POST /ui/repositories/{repo}/gc", ops("gc"), (*page).gcRepository},

		// The fleet's workers.
		{"GET /ui/workers", pg("list-workers"), (*page).workers},
		{"POST /ui/workers/{worker}/drain", ops("drain-worker"), (*page).drainWorker},
		{"POST /ui/workers/revoke-token", ops("revoke-worker-token"), (*page).revokeWorkerToken},

		// Sequential media: libraries, volumes by pool, a volume's
		// contents; copies to tape, restores and verifies as tasks.
		{"GET /ui/media", pg("list-media-libraries", "media-library-status", "list-media-volumes"), (*page).mediaPage},
		{"GET /ui/media/volumes/{barcode}", pg("list-media-volumes", "media-contents", "list-media-libraries"), (*page).mediaVolume},
		{"POST /ui/media/libraries/{library}/copy", ops("media-copy"), (*page).mediaCopy},
		{"POST /ui/media/libraries/{library}/restore", ops("media-restore"), (*page).mediaRestore},
		{"POST /ui/media/libraries/{library}/volumes/{barcode}/verify", ops("media-verify"), (*page).mediaVerify},
	}
}

// adminRoutes are the pages and actions that set coffer up:
// notifications, settings, access, one's own account.
func adminRoutes() []route {
	return []route{
		// Notifications.
		{"GET /ui/notifications", pg("list-notification-targets", "list-notification-matchers"), (*page).notifications},
		{"POST /ui/notifications/targets/{name}/test", ops("test-notification-target"), (*page).testTarget},
		{"POST /ui/notifications/targets", ops("create-notification-target", "get-notification-target", "update-notification-target"), (*page).saveTarget},
		{"POST /ui/notifications/targets/{name}/delete", ops("delete-notification-target"), (*page).deleteTarget},
		{"POST /ui/notifications/matchers", ops("create-notification-matcher", "get-notification-matcher", "update-notification-matcher"), (*page).saveMatcher},
		{"POST /ui/notifications/matchers/{name}/delete", ops("delete-notification-matcher"), (*page).deleteMatcher},

		// The engine's settings (configuration objects).
		{"GET /ui/upgrade", pg("check-upgrade"), (*page).upgradePage},
		{"GET /ui/settings", pg(append(configOps(settingKinds, "list"), "get-effective-config")...), (*page).settings},

		// Every configuration object the pages edit (page_config.go).
		{"POST /ui/config/{kind}", configOps(editableKinds(), "create", "update"), (*page).saveConfig},
		{"POST /ui/config/{kind}/{name}/delete", configOps(deletableKinds(), "delete"), (*page).deleteConfig},

		// Access.
		{"GET /ui/access", pg("list-users", "list-tokens", "list-acl"), (*page).access},
		{"POST /ui/access/tokens", ops("create-token"), (*page).createToken},
		{"POST /ui/access/tokens/{token}/revoke", ops("revoke-token"), (*page).revokeToken},
		{"POST /ui/access/users", ops("create-user"), (*page).createUser},
		{"POST /ui/access/users/{user}/disable", ops("disable-user"), (*page).disableUser},
		{"POST /ui/access/users/{user}/enable", ops("enable-user"), (*page).enableUser},
		{"POST /ui/access/users/{user}/delete", ops("delete-user"), (*page).deleteUser},
		{"POST /ui/access/users/{user}/setup-link", ops("issue-setup-link"), (*page).setupLink},
		{"POST /ui/access/password", ops("whoami", "change-password"), (*page).changePassword},
		{"POST /ui/access/acl", ops("set-acl"), (*page).grant},
		{"POST /ui/access/acl/remove", ops("remove-acl"), (*page).revokeGrant},
		{"GET /ui/access/audit", pg("query-audit"), (*page).audit},

		// One's own account: second factors.
		// The Account page's script asks the API for a registration's
		// challenge (begin-security-key-registration) before the form is sent.
		{"GET /ui/account", pg("second-factors", "begin-security-key-registration"), (*page).account},
		{"POST /ui/account/totp", ops("whoami", "second-factors", "enrol-totp"), (*page).enrolTOTP},
		{"POST /ui/account/totp/confirm", ops("whoami", "second-factors", "confirm-totp"), (*page).confirmTOTP},
		{"POST /ui/account/totp/remove", ops("whoami", "second-factors", "remove-totp"), (*page).removeTOTP},
		{"POST /ui/account/recovery-codes", ops("whoami", "second-factors", "regenerate-recovery-codes"), (*page).regenerateCodes},
		{"POST /ui/account/security-key", ops("whoami", "second-factors", "register-security-key"), (*page).addSecurityKey},
		{"POST /ui/account/security-key/remove", ops("whoami", "second-factors", "remove-security-key"), (*page).removeSecurityKey},
	}
}

// OperationIDs are the operations the console's pages and actions call,
// for the test that holds every face to the operation table.
func OperationIDs() map[string]bool {
	out := map[string]bool{}
	for _, rt := range New(Config{}).routes() {
		for _, id := range rt.Ops {
			out[id] = true
		}
	}
	return out
}

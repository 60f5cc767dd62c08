package repoops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	// The repository and its backup points.
	{ID: "init-repository", Method: "Init", Summary: "create a repository", HTTP: service.Post, Path: "/repositories/{repo}/init",
		Requires:  service.Require(auth.RepoModify, service.OnRepo),
		NoConsole: "creates a repository's storage once, when it is installed (`coffer init`), with the password and the keys of another (`--copy-keys-from`) its host holds",
		Endpoint:  service.Returns(Ops.Init)},
	{ID: "list-points", Method: "Points", Summary: "list the backup points of a repository, from the repository", HTTP: service.Get,
		Path: "/repositories/{repo}/points", Requires: service.Lists(auth.RepoAudit, service.OnRepo), Endpoint: service.Returns(Ops.Points)},
	{ID: "list-catalog-points", Method: "CatalogPoints", Summary: "list backup points from the catalog", HTTP: service.Get, Path: "/points",
		Requires: service.Lists(auth.RepoAudit, auth.RepositoriesPath), Endpoint: service.ReturnsPage(Ops.CatalogPoints)},
	{ID: "rebuild-catalog", Method: "RebuildCatalog", Summary: "recreate the catalog's backup points from a repository", HTTP: service.Post,
		Path: "/repositories/{repo}/catalog/rebuild", Requires: service.Require(auth.RepoModify, service.OnRepo),
		Endpoint: service.Returns(Ops.RebuildCatalog)},

	// Maintenance.
	{ID: "verify", Method: "Verify", Summary: "check a repository's integrity", HTTP: service.Post, Path: "/repositories/{repo}/verify",
		Requires: service.Require(auth.RepoVerify, service.OnRepo), Endpoint: service.Returns(Ops.Verify)},
	{ID: "forget", Method: "Forget", Summary: "remove backup points by keep rules", HTTP: service.Post, Path: "/repositories/{repo}/forget",
		Requires: service.Require(auth.RepoPrune, service.OnRepo), Endpoint: service.Returns(Ops.Forget)},
	{ID: "protect", Method: "Protect", Summary: "protect backup points from forget, or release them", HTTP: service.Post,
		Path: "/repositories/{repo}/protect", Requires: service.Require(auth.RepoPrune, service.OnRepo),
		Endpoint: service.Returns(Ops.Protect)},
	{ID: "gc", Method: "GC", Summary: "delete what no backup point needs", HTTP: service.Post, Path: "/repositories/{repo}/gc",
		Requires: service.Require(auth.RepoPrune, service.OnRepo), Endpoint: service.Returns(Ops.GC)},
	{ID: "stats", Method: "Stats", Summary: "a repository's sizes and ratios", HTTP: service.Get, Path: "/repositories/{repo}/stats",
		Requires: service.Require(auth.RepoAudit, service.OnRepo), Endpoint: service.Returns(Ops.Stats)},
	{ID: "repository-usage", Method: "RepositoryUsage", Summary: "a repository's usage over the last 30 days, its trend and its estimated full date",
		HTTP: service.Get, Path: "/repositories/{repo}/usage", Requires: service.Require(auth.RepoAudit, service.OnRepo),
		NotOnCommandLine: "the console's trend: `coffer stats` prints the sizes now, and the samples are the server's",
		Endpoint:         service.Returns(Ops.RepositoryUsage)},
	{ID: "copy", Method: "Copy", Summary: "copy backup points to a second repository", HTTP: service.Post, Path: "/repositories/{repo}/copy",
		Requires:     []service.Requirement{{Privilege: auth.RepoRead, Object: service.OnRepo}, {Privilege: auth.RepoBackup, Object: "/repositories/{to}"}},
		MaxBodyBytes: 256 * service.KiB, Endpoint: service.Returns(Ops.Copy)},
	{ID: "repair", Method: "Repair", Summary: "mend damage verify found, keeping everything readable", HTTP: service.Post,
		Path: "/repositories/{repo}/repair/{what}", Requires: service.Require(auth.RepoModify, service.OnRepo),
		Endpoint: service.Returns(Ops.Repair)},
	{ID: "undelete", Method: "Undelete", Summary: "bring back locked objects hidden by deletes (object lock)", HTTP: service.Post,
		Path: "/repositories/{repo}/undelete", Requires: service.Require(auth.RepoModify, service.OnRepo),
		NoConsole: "not in the console yet: `coffer repair undelete`",
		Endpoint:  service.Returns(Ops.Undelete)},
	{ID: "list-keys", Method: "Keys", Summary: "list a repository's keys", HTTP: service.Get, Path: "/repositories/{repo}/keys",
		Requires: service.Require(auth.RepoAudit, service.OnRepo), Endpoint: service.Returns(Ops.Keys)},
	{ID: "add-key", Method: "AddKey", Summary: "add a password to a repository", HTTP: service.Post, Path: "/repositories/{repo}/keys",
		Requires: service.Require(auth.RepoModify, service.OnRepo), Endpoint: service.Creates(Ops.AddKey)},
	{ID: "remove-key", Method: "RemoveKey", Summary: "remove a key", HTTP: service.Delete, Path: "/repositories/{repo}/keys/{key}",
		Requires: service.Require(auth.RepoModify, service.OnRepo), Endpoint: service.Returns(Ops.RemoveKey)},
	{ID: "list-leases", Method: "Leases", Summary: "list who works on a repository", HTTP: service.Get, Path: "/repositories/{repo}/leases",
		Requires: service.Require(auth.RepoAudit, service.OnRepo), Endpoint: service.Returns(Ops.Leases)},
}

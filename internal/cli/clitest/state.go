package clitest

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// MustJSON runs a command with --json and decodes its output as a T.
func MustJSON[T any](t *testing.T, e *Env, args ...string) T {
	t.Helper()
	out := e.Must(append(args, "--json")...)
	return Decode[T](t, out)
}

// ServerState is the state that a catalog export must carry across a lost
// server, as the commands show it: the recovery tests compare it before
// the export and after the import.
type ServerState struct {
	Users  []api.User
	Tokens []api.Token
	ACL    []api.ACLEntry
	Audit  []api.AuditRecord
	Points []api.BackupPoint
	// Config are the configuration objects in effect, the file's and
	// those created through the API (with their versions and authors).
	Config []api.ConfigObject
}

// StateOf reads the ServerState through the command line.
func StateOf(t *testing.T, e *Env) ServerState {
	t.Helper()
	return ServerState{
		Users:  MustJSON[[]api.User](t, e, "user", "list"),
		Tokens: MustJSON[[]api.Token](t, e, "token", "list"),
		ACL:    MustJSON[[]api.ACLEntry](t, e, "acl", "list"),
		Audit:  MustJSON[[]api.AuditRecord](t, e, "audit"),
		Points: MustJSON[[]api.BackupPoint](t, e, "catalog", "points"),
		Config: MustJSON[[]api.ConfigObject](t, e, "config", "list"),
	}
}

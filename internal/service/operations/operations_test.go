package operations

import (
	"math/bits"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/accessops"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/bootops"
	"github.com/coffer-backup/coffer/internal/service/configops"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/jobops"
	"github.com/coffer-backup/coffer/internal/service/mediaops"
	"github.com/coffer-backup/coffer/internal/service/planops"
	"github.com/coffer-backup/coffer/internal/service/replicaops"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/restoreops"
	"github.com/coffer-backup/coffer/internal/service/upgradeops"
	"github.com/coffer-backup/coffer/internal/service/workerops"
)

// domains are the domain packages: their tables and the types whose
// methods their operations are.
var domains = []struct {
	name  string
	table []service.Operation
	ops   reflect.Type
}{
	{"repoops", repoops.Operations, reflect.TypeFor[repoops.Ops]()},
	{"backupops", backupops.Operations, reflect.TypeFor[backupops.Ops]()},
	{"restoreops", restoreops.Operations, reflect.TypeFor[restoreops.Ops]()},
	{"bootops", bootops.Operations, reflect.TypeFor[bootops.Ops]()},
	{"mediaops", mediaops.Operations, reflect.TypeFor[mediaops.Ops]()},
	{"jobops", jobops.Operations, reflect.TypeFor[jobops.Ops]()},
	{"fleetops", fleetops.Operations, reflect.TypeFor[fleetops.Ops]()},
	{"workerops", workerops.Operations, reflect.TypeFor[workerops.Ops]()},
	{"planops", planops.Operations, reflect.TypeFor[planops.Ops]()},
	{"configops", configops.Operations, reflect.TypeFor[configops.Ops]()},
	{"accessops", accessops.Operations, reflect.TypeFor[accessops.Ops]()},
	{"upgradeops", upgradeops.Operations, reflect.TypeFor[upgradeops.Ops]()},
	{"replicaops", replicaops.Operations, reflect.TypeFor[replicaops.Ops]()},
}

// TestOperationsNameRealMethods: every operation names a method of its
// domain's Ops, no ID is used twice, and All holds every domain's table,
// so the table cannot drift from the code the faces call.
func TestOperationsNameRealMethods(t *testing.T) {
	ids := map[string]bool{}
	n := 0
	for _, d := range domains {
		n += len(d.table)
		for _, op := range d.table {
			if ids[op.ID] {
				t.Errorf("operation %s is listed twice", op.ID)
			}
			ids[op.ID] = true
			if _, ok := d.ops.MethodByName(op.Method); !ok {
				t.Errorf("operation %s names %s, which %s.Ops does not have", op.ID, op.Method, d.name)
			}
			if op.Summary == "" {
				t.Errorf("operation %s has no summary", op.ID)
			}
		}
	}
	if n != len(All) {
		t.Errorf("All has %d operations, the domains %d", len(All), n)
	}
}

// notOperations are the exported methods of the domains' Ops that are not
// use cases of their own.
var notOperations = map[string]string{
	"fleetops.RunSchedules":              "the server's loop itself, not an operation it offers",
	"replicaops.RemoveFailoverLeftovers": "the server's clean-up at its start of what a test failover killed with its server left, never through the API",
	"accessops.Bootstrap":                "first-run setup on the server's host (coffer server init, the first start), never through the API",
	"accessops.NeedsSetup":               "whether the server's first start must bootstrap",
	"fleetops.HealthMonitor":             "the server's periodic checks, run by RunSchedules",
	"fleetops.RunMaintenance":            "one run of a maintenance schedule (gc, verify, forget, copy operations by ID), run by RunSchedules",
	"backupops.BackupQMP":                "backup-vm through a QMP socket of this host, for the command line (no request names a host's socket)",
	"restoreops.FilesFindEach":           "files-find handing each match to a callback as it is found, for the command line",
	"repoops.CopyWith":                   "copy between repositories by location (the command line's --from/--to), which the API's copy names by configuration",
	"repoops.InitWith":                   "init with the password the command line asked for and a key source of this host (the API's init reads the configured password)",
	"fleetops.RefreshInventories":        "the command line without a server lists the connections live before it reads the inventory (a server's schedules keep it)",
	"repoops.RepositoryPoints":           "the points listing with the manifests it skipped, which the command line names (the API's listing has no place for them)",
	// A virtual tape library is made, and filled with cartridges, on the
	// host it lives on, as a real one is installed and loaded: the API
	// names the libraries of the configuration and never creates files
	// at a path of the server's host.
	"mediaops.CreateVTL":       "makes a virtual tape library's directory on this host (the API names configured libraries, never host paths)",
	"mediaops.AddVTLCartridge": "puts a cartridge into a virtual tape library's slot on this host, as an operator loads a real one",
	"jobops.FollowJob":         "follow-job's events handed to a callback, for the command line (the API streams them)",
	"restoreops.FilesArchive":  "files-archive writing to a writer, which the server's download streams",
	"restoreops.InstantStart":  "instant-start serving in this process until its context ends (the endpoint serves in the server's background)",
	"restoreops.InstantServe":  "instant-serve likewise",
	"restoreops.InstantExport": "instant-export likewise",
	"accessops.Login":          "login's session, which the endpoint sets as a cookie",
	"accessops.Logout":         "logout, which the endpoint answers by clearing the cookie",
}

// TestEveryMethodIsAnOperation: a new use case added to a domain's Ops
// without an entry in its table fails here, before a face misses it. The
// kernel's methods (promoted through Ops) are not use cases.
func TestEveryMethodIsAnOperation(t *testing.T) {
	kernel := reflect.TypeFor[*service.Service]()
	for _, d := range domains {
		methods := map[string]bool{}
		for _, op := range d.table {
			methods[op.Method] = true
		}
		for i := range d.ops.NumMethod() {
			m := d.ops.Method(i).Name
			if _, promoted := kernel.MethodByName(m); promoted {
				continue
			}
			if !methods[m] && notOperations[d.name+"."+m] == "" {
				t.Errorf("%s.Ops.%s is neither in its table nor in notOperations", d.name, m)
			}
		}
	}
}

// TestEveryOperationDeclaresWhoMayCallIt: an operation declares the
// privileges it requires on its objects, or says why it declares none
// (internal/auth checks its own rules, or it is how a caller signs in);
// a declared object is a path of the ACL tree whose parameters the route
// provides. auth.Allowed refuses a privilege of 0 anyway: an operation
// without one would be refused to everyone, not open to all.
func TestEveryOperationDeclaresWhoMayCallIt(t *testing.T) {
	for _, op := range All {
		if op.Internal != "" {
			if op.HTTP != "" || op.Path != "" || len(op.Requires) > 0 || op.Endpoint == nil {
				t.Errorf("operation %s is internal (%s): it has an endpoint to run it by, and no route or privileges", op.ID, op.Internal)
			}
			continue
		}
		if len(op.Requires) == 0 && op.SelfService == "" {
			t.Errorf("operation %s declares no privilege and does not say why", op.ID)
		}
		if op.Public && len(op.Requires) > 0 {
			t.Errorf("operation %s is public but requires privileges", op.ID)
		}
		for _, r := range op.Requires {
			if r.Privilege == 0 || bits.OnesCount32(uint32(r.Privilege)) != 1 {
				t.Errorf("operation %s requires %s: one privilege per requirement", op.ID, r.Privilege)
			}
			if !strings.HasPrefix(r.Object, "/") {
				t.Errorf("operation %s: object %q is not an ACL path", op.ID, r.Object)
			}
			for _, m := range paramRE.FindAllStringSubmatch(r.Object, -1) {
				if !strings.Contains(op.Path, "{"+m[1]+"}") && !queryParam(op, m[1]) {
					t.Errorf("operation %s: object %s names {%s}, which its route %s does not provide", op.ID, r.Object, m[1], op.Path)
				}
			}
		}
		if op.HTTP == "" || !strings.HasPrefix(op.Path, "/") || op.Endpoint == nil {
			t.Errorf("operation %s has no route", op.ID)
		}
	}
}

var paramRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// queryParam reports a query parameter of the operation's input.
func queryParam(op service.Operation, name string) bool {
	var find func(t reflect.Type) bool
	find = func(t reflect.Type) bool {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct && find(f.Type) {
				return true
			}
			if q, _, _ := strings.Cut(f.Tag.Get("query"), ","); q == name {
				return true
			}
		}
		return false
	}
	return find(op.Endpoint.Input())
}

// TestConfigOperationsAreListed: every verb on every kind of
// configuration object is an operation under the ID ConfigOperationID
// gives it (the ID its audit records carry), running the generic method.
func TestConfigOperationsAreListed(t *testing.T) {
	byID := map[string]string{}
	for _, op := range All {
		byID[op.ID] = op.Method
	}
	methods := map[string]string{"list": "ConfigObjects", "get": "ConfigObject", configobj.Create: "CreateConfigObject",
		configobj.Update: "UpdateConfigObject", configobj.Delete: "DeleteConfigObject"}
	for _, k := range configobj.Kinds {
		for verb, method := range methods {
			id := configops.ConfigOperationID(verb, k)
			if byID[id] != method {
				t.Errorf("operation %s runs %q, want %s", id, byID[id], method)
			}
			if mutates := verb != "list" && verb != "get"; configops.RecordsOwnAudit(id) != mutates {
				t.Errorf("RecordsOwnAudit(%s) = %v", id, !mutates)
			}
		}
	}
}

package service

import (
	"math/bits"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/configobj"
)

// TestOperationsNameRealMethods: every operation names a method of
// *Service, and no ID is used twice, so the table cannot drift from the
// code the faces call.
func TestOperationsNameRealMethods(t *testing.T) {
	typ := reflect.TypeFor[*Service]()
	ids := map[string]bool{}
	for _, op := range Operations {
		if ids[op.ID] {
			t.Errorf("operation %s is listed twice", op.ID)
		}
		ids[op.ID] = true
		if _, ok := typ.MethodByName(op.Method); !ok {
			t.Errorf("operation %s names %s, which *Service does not have", op.ID, op.Method)
		}
		if op.Summary == "" {
			t.Errorf("operation %s has no summary", op.ID)
		}
	}
}

// notOperations are the exported methods of *Service that are not use
// cases of their own.
var notOperations = map[string]string{
	"Logger":                  "plumbing",
	"OpenStore":               "the storage registry, used by the operations",
	"CatalogLocation":         "where the catalog is, for messages",
	"RunSchedules":            "the server's loop itself, not an operation it offers",
	"Serving":                 "whether RunSchedules's engine runs in this process (runs started here join it)",
	"ServingConnector":        "export_test.go: the serving engine's connector, for tests",
	"Bootstrap":               "first-run setup on the server's host (coffer server init, the first start), never through the API",
	"NeedsSetup":              "whether the server's first start must bootstrap",
	"ForRepository":           "binds the service to the repository a request names",
	"RepositoryNames":         "the repositories a request may name",
	"RepositoryNamesInEffect": "the repositories of the configuration in effect, which the console offers",
	"RepositoryName":          "names a repository ID for access checks on catalog listings",
	"PointVM":                 "finds a point's VM for access checks through the VM",
	"Ready":                   "the server's readiness probe (/readyz)",
	"Start":                   "opens the catalog, task manager and notifier of a long-lived process",
	"Close":                   "closes what Start or the first task opened",
	"TaskManager":             "the task manager, for the server's task endpoints",
	"Notifier":                "the notifier, for the server's notification endpoints",
	"HealthMonitor":           "the server's periodic checks, run by RunSchedules",
	"RunMaintenance":          "one run of a maintenance schedule (gc, verify, forget, copy operations), run by RunSchedules",
	"BackupQMP":               "backup-vm through a QMP socket of this host, for the command line (no request names a host's socket)",
	"FilesFindEach":           "files-find handing each match to a callback as it is found, for the command line",
	"WatchConfig":             "the server's loops subscribe to the configuration in effect through it",
	"CopyWith":                "copy between repositories by location (the command line's --from/--to) or by maintenance job, which the API's copy names by configuration",
	"InitWith":                "init with the password the command line asked for and a key source of this host (the API's init reads the configured password)",
	"RefreshInventories":      "the command line without a server lists the connections live before it reads the inventory (a server's schedules keep it)",
	"RepositoryPoints":        "the points listing with the manifests it skipped, which the command line names (the API's listing has no place for them)",
	// A virtual tape library is made, and filled with cartridges, on the
	// host it lives on, as a real one is installed and loaded: the API
	// names the libraries of the configuration and never creates files
	// at a path of the server's host.
	"RunPolicy":       "starts a policy's run and returns its handle, which the command line watches as it goes (backup-policy answers with the job)",
	"CreateVTL":       "makes a virtual tape library's directory on this host (the API names configured libraries, never host paths)",
	"AddVTLCartridge": "puts a cartridge into a virtual tape library's slot on this host, as an operator loads a real one",
}

// TestEveryMethodIsAnOperation: a new use case added to *Service without
// an entry in Operations fails here, before a face misses it.
func TestEveryMethodIsAnOperation(t *testing.T) {
	methods := map[string]bool{}
	for _, op := range Operations {
		methods[op.Method] = true
	}
	typ := reflect.TypeFor[*Service]()
	for i := range typ.NumMethod() {
		m := typ.Method(i).Name
		if !methods[m] && notOperations[m] == "" {
			t.Errorf("(*Service).%s is neither in Operations nor in notOperations", m)
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
	for _, op := range Operations {
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
func queryParam(op Operation, name string) bool {
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
	for _, op := range Operations {
		byID[op.ID] = op.Method
	}
	methods := map[string]string{"list": "ConfigObjects", "get": "ConfigObject", configobj.Create: "CreateConfigObject",
		configobj.Update: "UpdateConfigObject", configobj.Delete: "DeleteConfigObject"}
	for _, k := range configobj.Kinds {
		for verb, method := range methods {
			id := ConfigOperationID(verb, k)
			if byID[id] != method {
				t.Errorf("operation %s runs %q, want %s", id, byID[id], method)
			}
			if mutates := verb != "list" && verb != "get"; RecordsOwnAudit(id) != mutates {
				t.Errorf("RecordsOwnAudit(%s) = %v", id, !mutates)
			}
		}
	}
}

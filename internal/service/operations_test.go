package service

import (
	"reflect"
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
	"Logger":          "plumbing",
	"OpenStore":       "the storage registry, used by the operations",
	"CatalogLocation": "where the catalog is, for messages",
	"RunSchedules":    "the server's loop itself, not an operation it offers",
	"Start":           "opens the catalog, task manager and notifier of a long-lived process",
	"Close":           "closes what Start or the first task opened",
	"TaskManager":     "the task manager, for the server's task endpoints",
	"Notifier":        "the notifier, for the server's notification endpoints",
	"HealthMonitor":   "the server's periodic checks, run by RunSchedules",
	"RunMaintenance":  "one run of a maintenance schedule (gc, verify, forget, copy operations), run by RunSchedules",
	"WatchConfig":     "the server's loops subscribe to the configuration in effect through it",
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

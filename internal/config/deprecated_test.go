package config

import (
	"reflect"
	"testing"
)

// TestDeprecatedKeysAreFoundWhereverTheFileUsesThem: top-level keys,
// keys of a section and keys of a list's items.
func TestDeprecatedKeysAreFoundWhereverTheFileUsesThem(t *testing.T) {
	list := []Deprecation{
		{Key: "log-level", Since: "v9", Instead: "logging.level"},
		{Key: "maintenance.takeover-after", Since: "v9", Instead: "server.takeover-after"},
		{Key: "policies.retries", Since: "v9", Instead: "policies.retry"},
		{Key: "unused", Since: "v9", Instead: "nothing"},
	}
	doc := []byte(`
log-level: warn
maintenance:
  takeover-after: 3s
policies:
  - {name: a, schedule: daily}
  - {name: b, retries: 2}
`)
	got, err := DeprecatedIn(doc, list)
	if err != nil {
		t.Fatal(err)
	}
	if want := list[:3]; !reflect.DeepEqual(got, want) {
		t.Errorf("found %v, want %v", got, want)
	}
}

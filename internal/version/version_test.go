package version

import (
	"runtime"
	"testing"
)

func TestInjectedValuesWin(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v1.2.3-4-gabcdef012345", "abcdef0123456789abcdef0123456789abcdef01"
	got := Get()
	if got.Version != version || got.Revision != revision || got.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v, want the injected version and revision with %s", got, runtime.Version())
	}
}

func TestUninjectedBuildSaysWhatItKnows(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "", ""
	got := Get()
	// A test binary is built from the module in place: no tag, and no
	// commit under -buildvcs=false, so both fall back.
	if got.Version == "" || got.Revision == "" {
		t.Fatalf("Get() = %+v: an uninjected build must still say something", got)
	}
	if got.Version != "devel" && got.Version[0] != 'v' {
		t.Fatalf("version %q is neither a module version nor devel", got.Version)
	}
}

// Package version says which coffer this is: the release (or how far an
// untagged build is from one), the commit, and the Go toolchain that
// built it. scripts/build.sh injects the first two with -ldflags -X;
// a plain `go build` falls back to what the toolchain recorded.
package version

import (
	"runtime"
	"runtime/debug"
)

// Injected by scripts/build.sh:
//
//	-X github.com/coffer-backup/coffer/internal/version.version=v0.1.0-3-g1a2b3c4d5e6f
//	-X github.com/coffer-backup/coffer/internal/version.revision=<full commit>
var (
	version  string
	revision string
)

// Info is what `coffer version --json` prints and coffer_build_info
// labels.
type Info struct {
	// Version is a tag (v0.1.0) for a release build; an untagged build
	// says how far it is from the last tag, git describe's way
	// (v0.1.0-3-g1a2b3c4d5e6f, v0.0.0-N-gSHA before the first tag), and
	// a build without either says "devel".
	Version string `json:"version"`
	// Revision is the full commit, "unknown" when nothing recorded it.
	Revision string `json:"revision"`
	// GoVersion is the toolchain's, as runtime.Version says.
	GoVersion string `json:"goversion"`
}

// Get returns this binary's build information.
func Get() Info {
	i := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if i.Version != "" && i.Revision != "" {
		return i
	}
	recorded := fromBuildInfo()
	if i.Version == "" {
		i.Version = recorded.Version
	}
	if i.Revision == "" {
		i.Revision = recorded.Revision
	}
	return i
}

// fromBuildInfo reads what the toolchain recorded: the main module's
// version (a tag or a pseudo-version when built from a module) and the
// VCS commit (absent under -buildvcs=false).
func fromBuildInfo() Info {
	i := Info{Version: "devel", Revision: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		i.Version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			i.Revision = s.Value
		}
	}
	return i
}

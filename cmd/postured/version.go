package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// build describes the running binary, from the build information the Go
// toolchain records (runtime/debug.ReadBuildInfo): the main module's
// version (a tag, or a pseudo-version derived from the commit) and the VCS
// revision, time and modified flag. A build without VCS information (go
// run, -buildvcs=false, a tree without .git) says "(devel)" and "unknown".
type build struct {
	Version  string // main module version: v1.2.3, v0.0.0-20261123221500-a203720abcde+dirty, or (devel)
	Revision string // full VCS revision, or unknown
	Time     string // commit time (RFC 3339), or unknown
	Modified bool   // the tree had uncommitted changes
}

// readBuild reads the build information of the running binary.
func readBuild() build {
	b := build{Version: "(devel)", Revision: "unknown", Time: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := info.Main.Version; v != "" {
		b.Version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the line `postured version` and `postured --version` print.
func (b build) String() string {
	if b.Revision == "unknown" {
		return fmt.Sprintf("postured %s (revision unknown: built without VCS information, as go run does; task build or task release stamp it; %s %s/%s)",
			b.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	rev := b.Revision
	if b.Modified {
		rev += ", modified"
	}
	return fmt.Sprintf("postured %s (revision %s, committed %s, %s %s/%s)", b.Version, rev, b.Time,
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// The binary's version, revision and commit time, as /version answers them.
var (
	version   = wireVersion(readBuild().Version)
	revision  = readBuild().Revision
	buildDate = readBuild().Time
)

// wireVersion is the version /version answers: a release's own (v1.2.3),
// and v0.0.0 for any other build ((devel), a pseudo-version, a modified
// tree), as the controller's development builds answer. Clients read it as
// a semver to learn what the controller supports, and take v0.0.0 for a
// build that supports everything: sdk-golang sends configTypes on service
// lists only to v0.0.0 or v1.1.0 and later.
func wireVersion(v string) string {
	if sv, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v")); err == nil && sv.Prerelease() == "" && sv.Metadata() == "" {
		return "v" + sv.String()
	}
	return "v0.0.0"
}

type versionCmd struct{}

func (versionCmd) Run(s streams) error {
	_, err := fmt.Fprintln(s.out, readBuild())
	return err
}

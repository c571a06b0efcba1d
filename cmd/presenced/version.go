package main

import (
	"runtime/debug"
	"strings"
)

// The build's stamp, set by `make build` (and the image builds) with
// -ldflags "-X main.version=... -X main.revision=...": the version of the
// VERSION file, the VCS revision ("unknown" when git was not there), its
// commit time (RFC 3339, UTC) and "true" when the working tree had changes.
// Empty in a plain `go build`, `go install` or `go run`: the version line
// then comes from the build information Go records (buildInfoVersionLine).
var (
	version      string
	revision     string
	revisionTime string
	modified     string
)

// stamp is the -X values of one build.
type stamp struct {
	Version, Revision, RevisionTime, Modified string
}

// linkerStamp is this binary's stamp.
func linkerStamp() stamp {
	return stamp{Version: version, Revision: revision, RevisionTime: revisionTime, Modified: modified}
}

// wantsVersion reports whether args ask for the version: -version or
// --version anywhere before a "--" that ends the flags.
func wantsVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-version", "--version":
			return true
		}
	}
	return false
}

// versionLine describes this build in one line (see stampedVersionLine),
// from its linker stamp and bi and ok, what debug.ReadBuildInfo returns.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	return stampedVersionLine(linkerStamp(), bi, ok)
}

// stampedVersionLine is the version line of a build: from the linker stamp
// when it names a version, else from the build information alone
// (buildInfoVersionLine).
// A stamp without a revision falls back on the build information's VCS
// revision, then on "unknown"; the Go version always comes from bi.
//
//	presenced 0.9.0 revision 0123abcd 2026-11-30T10:00:00Z (modified) go1.26.8
func stampedVersionLine(s stamp, bi *debug.BuildInfo, ok bool) string {
	if s.Version == "" {
		return buildInfoVersionLine(bi, ok)
	}
	settings := map[string]string{}
	goVersion := ""
	if ok && bi != nil {
		for _, st := range bi.Settings {
			settings[st.Key] = st.Value
		}
		goVersion = bi.GoVersion
	}
	rev, revTime, dirty := s.Revision, s.RevisionTime, s.Modified == "true"
	if rev == "" || rev == "unknown" {
		if r := settings["vcs.revision"]; r != "" {
			rev, revTime, dirty = r, settings["vcs.time"], settings["vcs.modified"] == "true"
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	parts := []string{"presenced", s.Version, "revision", rev}
	if revTime != "" {
		parts = append(parts, revTime)
	}
	if dirty {
		parts = append(parts, "(modified)")
	}
	if goVersion != "" {
		parts = append(parts, goVersion)
	}
	return strings.Join(parts, " ")
}

// buildInfoVersionLine describes the build in one line: the module version, the VCS
// revision with its commit time and "(modified)" when the working tree had
// changes, and the Go version, e.g.
//
//	presenced v1.2.0 revision 0123abcd 2026-11-30T10:00:00Z (modified) go1.26.8
//
// bi and ok are what debug.ReadBuildInfo returns.
func buildInfoVersionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "presenced: no build information (built without module support)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(unknown version)"
	}
	parts := []string{"presenced", version}

	settings := make(map[string]string, len(bi.Settings))
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision", rev)
		if t := settings["vcs.time"]; t != "" {
			parts = append(parts, t)
		}
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "(modified)")
		}
	} else {
		parts = append(parts, "(no VCS revision)")
	}

	if bi.GoVersion != "" {
		parts = append(parts, bi.GoVersion)
	}
	return strings.Join(parts, " ")
}

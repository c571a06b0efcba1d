package main

import (
	"runtime/debug"
	"strings"
)

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

// versionLine describes the build in one line: the module version, the VCS
// revision with its commit time and "(modified)" when the working tree had
// changes, and the Go version, e.g.
//
//	presenced v1.2.0 revision 0123abcd 2026-11-30T10:00:00Z (modified) go1.26.8
//
// bi and ok are what debug.ReadBuildInfo returns.
func versionLine(bi *debug.BuildInfo, ok bool) string {
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

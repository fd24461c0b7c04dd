// Package buildinfo names the version a binary of this module reports, for
// the manager and the reloader alike.
package buildinfo

import "runtime/debug"

// Version is stamped, the -X main.version value a release build sets, when
// there is one; else the module version Go recorded (`go install ...@vX`);
// else "devel".
func Version(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

package schema

import (
	"embed"
	"io/fs"
)

// The schema files in FS.
const (
	User          = "user.schema.json"
	GroupSnapshot = "group_snapshot.schema.json"
	GroupDelta    = "group_delta.schema.json"
	Set           = "set.schema.json"
	Node          = "node.schema.json"
	Webhook       = "webhook.schema.json"
	Clock         = "clock.schema.json"
)

// BaseID is the prefix of every schema's $id: a schema's $id is BaseID
// followed by its file name. It names the schema; nothing is served there.
const BaseID = "https://github.com/presenced/presenced/schema/"

// FS holds the schema files, at its root.
//
//go:embed *.schema.json
var FS embed.FS

// Files returns the names of the schema files in FS, in name order.
func Files() []string {
	names, err := fs.Glob(FS, "*.schema.json")
	if err != nil {
		panic(err) // the pattern is valid
	}
	return names
}

package configs

import (
	"encoding"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The configuration reference, docs/configuration.md, names every key: a key
// of Config (its yaml tags, nested structs followed) or of the commented full
// config, presenced.yaml, that the reference does not spell out in full as
// `dotted.key` fails here. So a new setting cannot ship undocumented.
func TestDocsConfigurationNamesEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	fromStruct := structKeys(reflect.TypeFor[Config](), "")
	if len(fromStruct) < 100 {
		t.Fatalf("found only %d keys in Config: the walk is broken", len(fromStruct))
	}
	fromYAML := yamlKeys(t, "presenced.yaml")
	for _, k := range fromYAML {
		if !slices.Contains(fromStruct, k) {
			t.Errorf("presenced.yaml has %s, which Config does not", k)
		}
	}
	for _, k := range fromStruct {
		if !slices.Contains(fromYAML, k) {
			t.Errorf("presenced.yaml lacks %s: it documents every key with its default", k)
		}
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/configuration.md does not name `%s`", k)
		}
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// structKeys lists the dotted yaml keys of t: a struct field is a section
// whose keys are listed in turn, a pointer is its element, and anything
// else (a scalar, a list, a map, a type that decodes itself from text) is
// one key.
func structKeys(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return []string{prefix}
	}
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		if prefix != "" {
			name = prefix + "." + name
		}
		keys = append(keys, structKeys(f.Type, name)...)
	}
	return keys
}

// yamlKeys lists the dotted keys of the YAML file at path: a mapping value is
// a section, except the maps a setting holds (presence.idle_after_devices).
func yamlKeys(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			if prefix != "" {
				k = prefix + "." + k
			}
			if v.Kind == yaml.MappingNode && k != "presence.idle_after_devices" && k != "presence.dormant_devices" {
				walk(v, k)
				continue
			}
			keys = append(keys, k)
		}
	}
	walk(root.Content[0], "")
	// node_id is commented out in the file (it defaults to the host name).
	if !slices.Contains(keys, "node_id") && strings.Contains(string(data), "\n# node_id:") {
		keys = append(keys, "node_id")
	}
	return keys
}

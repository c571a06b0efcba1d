package presenced_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/presenced/presenced"

type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// listPackages runs `go list -deps=false -json ./...` over the module.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// floorPlan is which of the module's packages each package may import:
// data flows one way, from the hooks through the tracker and the store to
// the publisher and the delivery, and no stage knows the root that composes
// them. (The commands, the examples and the tests may import anything but
// a command.)
var floorPlan = map[string][]string{
	"presence":          {},
	"roster":            {"presence"},
	"store":             {"presence", "roster", "internal/names"},
	"tracker":           {"presence", "internal/names"},
	"publisher":         {"presence"},
	"groups":            {"presence", "roster", "store"},
	"nodes":             {"presence"},
	"interest":          {"internal/filter"},
	"hooks":             {"presence", "listener", "internal/connack", "internal/puback", "internal/wire", "internal/loglimit"},
	"delivery":          {"hooks", "presence", "internal/wire", "internal/filter"},
	"notify":            {"presence", "internal/filter", "webhook"},
	"stats":             {},
	"admin":             {"hooks", "presence", "roster"},
	"auth":              {"listener", "internal/connack"},
	"listener":          {"internal/loglimit"},
	"configs":           {"presence"},
	"internal/connack":  {},
	"internal/puback":   {},
	"internal/loglimit": {},
	"acl":               {},
	"internal/wire":     {},
	"internal/filter":   {},
	"internal/names":    {},
	"internal/testkit":  {"presence"},
	"schema":            {},
	"bench/result":      {},
	"bench/report":      {"bench/result"},
	"bench/gobench":     {},
	"sparkplug":         {"internal/puback"},
	"lifecycle":         {"presence"},
	"webhook":           {"presence"},
	"clock":             {"presence"},
	"slo":               {},
	"canary":            {"presence", "slo"},
	"": {"presence", "roster", "store", "tracker", "publisher", "groups", "nodes", "interest", "hooks", "delivery",
		"stats", "admin", "auth", "listener", "configs", "acl", "sparkplug", "lifecycle", "webhook", "notify", "clock", "slo", "canary"},
}

// The floor plan holds: each package imports only what floorPlan allows
// (a new package must be given its place), the pure core and the roster
// depend on neither mochi nor go-redis, and nothing imports a command.
func TestLayout(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "presence" || rel == "roster" {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "github.com/mochi-mqtt/") || strings.HasPrefix(d, "github.com/redis/") {
					t.Errorf("%s depends on %s", rel, d)
				}
			}
		}
		allowed, planned := floorPlan[rel]
		free := strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "examples/") || strings.HasPrefix(rel, "integration")
		if !planned && !free {
			t.Errorf("package %q has no place in the floor plan (floorPlan)", rel)
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			switch {
			case strings.HasPrefix(dep, "cmd/"):
				t.Errorf("%s imports a command (%s)", p.ImportPath, imp)
			case planned && !slices.Contains(allowed, dep):
				t.Errorf("%q imports %q, which the floor plan does not allow", rel, dep)
			}
		}
	}
}

// The root holds one store.Store and names no concrete store: no
// store.Memory, store.Redis or their constructors.
func TestRootKnowsNoConcreteStore(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	concrete := []string{"Memory", "Redis", "NewMemory", "NewRedis", "RedisOptions"}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "store" && slices.Contains(concrete, sel.Sel.Name) {
					t.Errorf("%s names store.%s", name, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// Each package's doc comment is in its doc.go, and in no other file.
func TestPackageDocInDocGo(t *testing.T) {
	for _, p := range listPackages(t) {
		files := slices.Clone(p.GoFiles)
		if len(files) == 0 {
			continue // tests only
		}
		slices.Sort(files)
		home := "doc.go"
		for _, name := range files {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case name == home && f.Doc == nil:
				t.Errorf("%s: no package doc in %s", p.ImportPath, name)
			case name != home && f.Doc != nil:
				t.Errorf("%s: a package doc in %s, not only in %s", p.ImportPath, name, home)
			}
		}
	}
}

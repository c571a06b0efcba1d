package presenced_test

import (
	"bytes"
	"encoding/json"
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

// The floor plan holds: the pure core imports neither mochi nor go-redis;
// no stage imports the plugin that composes the stages, and nothing
// imports the binary's composition root but the binary.
func TestLayout(t *testing.T) {
	pkgs := listPackages(t)
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "presence" {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "github.com/mochi-mqtt/") || strings.HasPrefix(d, "github.com/redis/") {
					t.Errorf("presence depends on %s", d)
				}
			}
		}
		for _, imp := range p.Imports {
			switch {
			case imp == module+"/node" && rel != "cmd/presenced":
				t.Errorf("%s imports the binary's composition root (node)", p.ImportPath)
			case strings.HasPrefix(imp, module+"/cmd/"):
				t.Errorf("%s imports a command (%s)", p.ImportPath, imp)
			case imp == module && slices.Contains([]string{"presence", "hooks", "tracker", "store", "publisher", "admin", "listener", "configs"}, rel):
				t.Errorf("stage %s imports the plugin that composes it", rel)
			}
		}
	}
}

// Each package's doc comment is in its doc.go when it has one (Go's
// convention), else in its first file (in name order), and in no other.
func TestPackageDocInFirstFile(t *testing.T) {
	for _, p := range listPackages(t) {
		files := slices.Clone(p.GoFiles)
		slices.Sort(files)
		if len(files) == 0 {
			continue // tests only
		}
		docFile := files[0]
		if slices.Contains(files, "doc.go") {
			docFile = "doc.go"
		}
		for _, name := range files {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case name == docFile && f.Doc == nil:
				t.Errorf("%s: no package doc in %s", p.ImportPath, name)
			case name != docFile && f.Doc != nil:
				t.Errorf("%s: a package doc in %s, not only in %s", p.ImportPath, name, docFile)
			}
		}
	}
}

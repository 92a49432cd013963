package layers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	module = "rulebook"
	design = "docs/design.md"
	// The table sits between these two lines of the design document.
	tableStart = "<!-- layers -->"
	tableEnd   = "<!-- /layers -->"
)

// TestImportLayers checks that every package of the module has a layer in
// docs/design.md and imports only packages of lower layers. Tests may
// import what they need; only the packages' own files count.
func TestImportLayers(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, design))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := parseLayers(doc)
	if err != nil {
		t.Fatalf("%s: %v", design, err)
	}
	pkgs := listPackages(t, root)

	listed := map[string]bool{}
	for _, p := range pkgs {
		listed[p.name()] = true
		if _, ok := layers[p.name()]; !ok {
			t.Errorf("%s has no layer in %s: add it to the table", p.name(), design)
		}
	}
	for name := range layers {
		if !listed[name] {
			t.Errorf("%s names %s, which is not a package of the module (any more)", design, name)
		}
	}
	for _, p := range pkgs {
		own, ok := layers[p.name()]
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module+"/")
			if !ours {
				continue
			}
			if l, ok := layers[dep]; ok && l >= own {
				t.Errorf("%s (layer %d) imports %s (layer %d); %s allows imports from lower layers only: drop the import, or move the packages in the table and say why",
					p.name(), own, dep, l, design)
			}
		}
	}
}

// parseLayers reads the layer table: rows "| N | `pkg` `pkg` … | … |"
// between tableStart and tableEnd, packages named relative to the module.
func parseLayers(doc []byte) (map[string]int, error) {
	start := bytes.Index(doc, []byte(tableStart))
	end := bytes.Index(doc, []byte(tableEnd))
	if start < 0 || end < start {
		return nil, errors.New("no layer table between " + tableStart + " and " + tableEnd)
	}
	row := regexp.MustCompile(`^\|\s*(\d+)\s*\|([^|]*)\|`)
	name := regexp.MustCompile("`([^`]+)`")
	layers := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(doc[start:end]))
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, pm := range name.FindAllStringSubmatch(m[2], -1) {
			if prev, dup := layers[pm[1]]; dup {
				return nil, errors.New(pm[1] + " is in layer " + strconv.Itoa(prev) + " and layer " + m[1])
			}
			layers[pm[1]] = n
		}
	}
	if len(layers) == 0 {
		return nil, errors.New("the layer table lists no packages")
	}
	return layers, nil
}

// goPackage is what go list says of a package.
type goPackage struct {
	ImportPath string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
}

func (p goPackage) name() string { return strings.TrimPrefix(p.ImportPath, module+"/") }

// listPackages lists the module's packages that have code outside tests
// (this one has none).
func listPackages(t *testing.T, root string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
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
			t.Fatalf("go list: %v", err)
		}
		if len(p.GoFiles)+len(p.CgoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

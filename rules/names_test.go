package rules_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestNoForeignNamesOutsideRules holds the registry to being the only
// place that spells an operator's ONNX, TASO or FlexFlow name: it scans
// the string literals of the module's Go files, tests aside, outside this
// package, the runtime (whose ONNX kernel table keeps its own names) and
// training (the planner's ONNX interpreter: a shape and cost rule per ONNX
// operator, the runtime's table without kernels).
// Attribute names are checked where they are ONNX's own spelling
// (kernel_shape, transA); words such as "axis" or "value" are too common
// to tell apart.
func TestNoForeignNamesOutsideRules(t *testing.T) {
	forbidden := foreignNames()
	shaped := regexp.MustCompile(`^(OP|PM)_[A-Za-z0-9_]+$`)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "rules" || rel == "runtime" || rel == "training" || d.Name() == "testdata" || rel != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && (forbidden[s] || shaped.MatchString(s)) {
				pos := fset.Position(lit.Pos())
				t.Errorf("%s:%d: %q is an ONNX, TASO or FlexFlow name; take it from the registry (package rules)", rel, pos.Line, s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// foreignNames are the names the registry gives operators in other
// formats, and ONNX's own attribute spellings.
func foreignNames() map[string]bool {
	names := map[string]bool{rules.ONNXIdentity: true, rules.ONNXConstant: true}
	for _, op := range rules.Default().Ops() {
		for _, s := range slices.Concat(op.ONNX.Types, []string{op.TASO.Name, op.FlexFlow.Type}, op.FlexFlow.Aliases, op.FlexFlow.Params) {
			if s != "" {
				names[s] = true
			}
		}
		for _, a := range op.ONNX.Attrs {
			if strings.ContainsAny(a, "_ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				names[a] = true
			}
		}
	}
	for _, f := range rules.UnsupportedForeignOps() {
		names[f.Name] = true
	}
	for k := rules.PMOpType; k <= rules.PMParallelDegree; k++ {
		names[k.String()] = true
	}
	return names
}

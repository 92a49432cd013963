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
	skip := func(dir string) bool { return dir == "rules" || dir == "runtime" || dir == "training" }
	eachSourceFile(t, skip, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := stringLiteral(n); ok && (forbidden[s] || shaped.MatchString(s)) {
				t.Errorf("%s:%d: %q is an ONNX, TASO or FlexFlow name; take it from the registry (package rules)", rel, fset.Position(n.Pos()).Line, s)
			}
			return true
		})
	})
}

// TestNoOperatorNamesOutsideRules holds the registry rows to being the one
// place for operator facts: outside this package and the runtime's kernel
// table, no Go file spells a registry operator's name in a string literal
// or indexes a node's Params by position. Name constants (rules.NameConv2D)
// and typed attributes (rules.ConvOf(p).Groups) are the way in.
func TestNoOperatorNamesOutsideRules(t *testing.T) {
	names := map[string]bool{}
	for _, reg := range []*rules.Registry{rules.All(), rules.FlexFlowReading()} {
		for _, op := range reg.Ops() {
			names[op.Name] = true
		}
	}
	skip := func(dir string) bool { return dir == "rules" || dir == "runtime" }
	eachSourceFile(t, skip, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := stringLiteral(n); ok && names[s] {
				t.Errorf("%s:%d: %q is a registry operator's name; use its rules.Name constant and read facts from its row", rel, fset.Position(n.Pos()).Line, s)
			}
			if ix, ok := n.(*ast.IndexExpr); ok {
				if sel, ok := ix.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Params" {
					t.Errorf("%s:%d: Params indexed by position; use the typed attributes (rules.ConvOf, rules.WindowOf, …) or Op.ParamValues", rel, fset.Position(n.Pos()).Line)
				}
			}
			return true
		})
	})
}

// eachSourceFile parses every non-test Go file of the module outside the
// top-level directories skip names, testdata and hidden directories.
func eachSourceFile(t *testing.T, skip func(dir string) bool, visit func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
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
			if skip(rel) || d.Name() == "testdata" || rel != "." && strings.HasPrefix(d.Name(), ".") {
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
		visit(rel, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stringLiteral returns the value of a string literal node.
func stringLiteral(n ast.Node) (string, bool) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
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

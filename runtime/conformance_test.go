package runtime

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
)

var update = flag.Bool("update", false, "rewrite testdata/conformance.txt from this run")

// Tolerances of the node tests: |got − want| ≤ atol + rtol·|want| per
// element, NaN matching NaN. The expected outputs are computed in float32
// or float64 by numpy; ours in float32 with different summation orders.
const (
	conformanceRTol = 1e-3
	conformanceATol = 1e-5
)

// conformanceSkips lists the node tests of supported operators that use
// something the runtime deliberately leaves out, with the reason. Every
// other such test must pass.
var conformanceSkips = map[string]string{
	"test_range_float_type_positive_delta":                   "Range over values computed at run time: the runtime folds it over constants (shape arithmetic) only",
	"test_scatternd":                                         "ScatterND over values computed at run time: the runtime folds it over constants (shape arithmetic) only",
	"test_scatternd_add":                                     "ScatterND's add reduction is not supported (nor needed by exported models)",
	"test_scatternd_multiply":                                "ScatterND's mul reduction is not supported (nor needed by exported models)",
	"test_cast_BFLOAT16_to_FLOAT":                            "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_DOUBLE_to_FLOAT":                              "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_DOUBLE_to_FLOAT16":                            "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_FLOAT16_to_DOUBLE":                            "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_FLOAT16_to_FLOAT":                             "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_FLOAT_to_BFLOAT16":                            "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_FLOAT_to_DOUBLE":                              "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_FLOAT_to_FLOAT16":                             "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_FLOAT_to_STRING":                              "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_cast_STRING_to_FLOAT":                              "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_BFLOAT16_to_FLOAT_expanded":               "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_DOUBLE_to_FLOAT16_expanded":               "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_DOUBLE_to_FLOAT_expanded":                 "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_FLOAT16_to_DOUBLE_expanded":               "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_FLOAT16_to_FLOAT_expanded":                "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_FLOAT_to_BFLOAT16_expanded":               "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_FLOAT_to_DOUBLE_expanded":                 "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_FLOAT_to_FLOAT16_expanded":                "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_FLOAT_to_STRING_expanded":                 "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_castlike_STRING_to_FLOAT_expanded":                 "float16, bfloat16, float64 or string tensors: the runtime computes in float32 only",
	"test_mod_mixed_sign_float16":                            "float16 tensors: the runtime computes in float32 only",
	"test_einsum_batch_diagonal":                             "float64 tensors: the runtime computes in float32 only",
	"test_einsum_batch_matmul":                               "float64 tensors: the runtime computes in float32 only",
	"test_einsum_inner_prod":                                 "float64 tensors: the runtime computes in float32 only",
	"test_einsum_sum":                                        "float64 tensors: the runtime computes in float32 only",
	"test_einsum_transpose":                                  "float64 tensors: the runtime computes in float32 only",
	"test_mod_mixed_sign_float64":                            "float64 tensors: the runtime computes in float32 only",
	"test_mod_mixed_sign_float32":                            "Mod over values computed at run time: the runtime folds it over constants (shape arithmetic) only",
	"test_where_example":                                     "Where over values computed at run time: the runtime folds it over constants (shape arithmetic) only",
	"test_pow_types_float":                                   "int64 data tensor: the runtime computes in float32 only",
	"test_pow_types_int32_float32":                           "int32 data tensor: the runtime computes in float32 only",
	"test_pow_types_int64_float32":                           "int64 data tensor: the runtime computes in float32 only",
	"test_identity_opt":                                      "optional type: the runtime handles tensors only",
	"test_identity_sequence":                                 "sequence type: the runtime handles tensors only",
	"test_maxpool_with_argmax_2d_precomputed_pads":           "MaxPool's int64 Indices output is not supported",
	"test_maxpool_with_argmax_2d_precomputed_strides":        "MaxPool's int64 Indices output is not supported",
	"test_batchnorm_epsilon_training_mode":                   "training mode is not supported: the runtime does inference",
	"test_batchnorm_example_training_mode":                   "training mode is not supported: the runtime does inference",
	"test_dropout_default_mask":                              "Dropout's bool mask output is not supported",
	"test_dropout_default_mask_ratio":                        "Dropout's bool mask output is not supported",
	"test_max_float16":                                       "float16 tensors: the runtime computes in float32 only",
	"test_max_float64":                                       "float64 tensors: the runtime computes in float32 only",
	"test_min_float16":                                       "float16 tensors: the runtime computes in float32 only",
	"test_min_float64":                                       "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_default_axes_keepdims_example":  "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_default_axes_keepdims_random":   "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_do_not_keepdims_example":        "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_do_not_keepdims_random":         "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_keepdims_example":               "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_keepdims_random":                "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_negative_axes_keepdims_example": "float64 tensors: the runtime computes in float32 only",
	"test_reduce_log_sum_exp_negative_axes_keepdims_random":  "float64 tensors: the runtime computes in float32 only",
	"test_training_dropout":                                  "training mode is not supported: the runtime does inference",
	"test_training_dropout_default":                          "training mode is not supported: the runtime does inference",
	"test_training_dropout_default_mask":                     "Dropout's bool mask output is not supported",
	"test_training_dropout_mask":                             "Dropout's bool mask output is not supported",
	"test_training_dropout_zero_ratio":                       "training mode is not supported: the runtime does inference",
	"test_training_dropout_zero_ratio_mask":                  "Dropout's bool mask output is not supported",
}

// conformanceCoveredElsewhere names the operators without a float32 node
// test, and the test that checks them instead.
var conformanceCoveredElsewhere = map[string]string{
	"ReduceLogSumExp": "TestReduceLogSumExp (every node test uses float64)",
	"ScatterND":       "TestShapeMath and swin's exports (every node test scatters into a value computed at run time)",
	"Einsum":          "TestEinsum and maxvit_t's export (every node test uses float64)",
	"Gelu":            "TestGelu (the installed node tests predate opset 20's Gelu)",
	"Cast":            "TestShapeMath and TestTorchvisionExports' vision transformers (every node test casts from or to a type other than float32)",
}

// conformanceRaised lists node tests whose model imports an opset below
// the supported 7 although the operator has not changed between that
// opset and 7: loaded as is they fail (the runtime rejects the opset), so
// they run with the import raised to 7, and count in their own column.
var conformanceRaised = map[string]string{
	"test_not_2d":                        "Not: opset 1, unchanged until 22",
	"test_not_3d":                        "Not: opset 1, unchanged until 22",
	"test_not_4d":                        "Not: opset 1, unchanged until 22",
	"test_globalaveragepool":             "GlobalAveragePool: opset 1, unchanged until 22",
	"test_globalaveragepool_precomputed": "GlobalAveragePool: opset 1, unchanged until 22",
	"test_softplus":                      "Softplus: opset 1, unchanged until 22",
	"test_softplus_example":              "Softplus: opset 1, unchanged until 22",
	"test_softsign":                      "Softsign: opset 1, unchanged until 22",
	"test_softsign_example":              "Softsign: opset 1, unchanged until 22",
	"test_elu":                           "Elu: opset 6, unchanged until 22",
	"test_elu_default":                   "Elu: opset 6, unchanged until 22",
	"test_elu_example":                   "Elu: opset 6, unchanged until 22",
	"test_selu":                          "Selu: opset 6, unchanged until 22",
	"test_selu_default":                  "Selu: opset 6, unchanged until 22",
	"test_selu_example":                  "Selu: opset 6, unchanged until 22",
	"test_hardsigmoid":                   "HardSigmoid: opset 6, unchanged until 22",
	"test_hardsigmoid_default":           "HardSigmoid: opset 6, unchanged until 22",
	"test_hardsigmoid_example":           "HardSigmoid: opset 6, unchanged until 22",
	"test_globalmaxpool":                 "GlobalMaxPool: opset 1, unchanged until 22",
	"test_globalmaxpool_precomputed":     "GlobalMaxPool: opset 1, unchanged until 22",
	"test_reduce_log_sum":                "ReduceLogSum: opset 6, unchanged until 11 (which only allowed negative axes)",
}

// conformanceCase is one node test whose operators are all supported.
type conformanceCase struct {
	name  string
	dir   string
	model *onnx.Model
	// op is the single node's op type, or "multi-node" for a model of
	// several nodes (the *_expanded function bodies).
	op string
}

func conformanceCases(t *testing.T, root string) []*conformanceCase {
	dirs, err := filepath.Glob(filepath.Join(root, "test_*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	supported := map[string]bool{}
	for _, op := range Ops() {
		supported[op] = true
	}
	var cases []*conformanceCase
	for _, dir := range dirs {
		m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if m.Graph == nil || len(m.Graph.Nodes) == 0 {
			continue
		}
		all := true
		for _, n := range m.Graph.Nodes {
			all = all && (n.Domain == "" || n.Domain == "ai.onnx") && supported[n.OpType]
		}
		if !all {
			continue
		}
		c := &conformanceCase{name: filepath.Base(dir), dir: dir, model: m, op: m.Graph.Nodes[0].OpType}
		if len(m.Graph.Nodes) > 1 {
			c.op = "multi-node"
		}
		cases = append(cases, c)
	}
	return cases
}

// bindIntegerInputs returns a copy of the model in which the graph inputs
// of integer type become initializers holding this data set's values. The
// runtime infers shapes at load, so the shape-steering inputs that the node
// tests feed at run time (Reshape's shape, Split's sizes, Pad's pads) must
// be constants; float inputs stay inputs.
func bindIntegerInputs(m *onnx.Model, set string) (*onnx.Model, map[string]*Tensor, error) {
	g := *m.Graph
	g.Inputs, g.Initializers = nil, slices.Clone(m.Graph.Initializers)
	inputs := map[string]*Tensor{}
	for i, vi := range m.Graph.Inputs {
		path := filepath.Join(set, fmt.Sprintf("input_%d.pb", i))
		pt, err := onnx.ReadTensor(path)
		if err != nil {
			return nil, nil, err
		}
		if isIntegerType(vi.ElemType) {
			pt.Name = vi.Name
			g.Initializers = append(g.Initializers, pt)
			continue
		}
		g.Inputs = append(g.Inputs, vi)
		data, err := tensorFloats(pt)
		if err != nil {
			return nil, nil, err
		}
		inputs[vi.Name] = &Tensor{Shape: pt.Shape(), Data: data}
	}
	bound := *m
	bound.Graph = &g
	return &bound, inputs, nil
}

// withOpset returns a copy of the model importing the default domain at
// version v.
func withOpset(m *onnx.Model, v int64) *onnx.Model {
	raised := *m
	raised.OpsetImports = nil
	for _, o := range m.OpsetImports {
		if o.Domain == "" || o.Domain == "ai.onnx" {
			o.Version = v
		}
		raised.OpsetImports = append(raised.OpsetImports, o)
	}
	return &raised
}

// runCase runs every data set of a case.
func runCase(c *conformanceCase) error {
	sets, _ := filepath.Glob(filepath.Join(c.dir, "test_data_set_*"))
	if len(sets) == 0 {
		return fmt.Errorf("no test_data_set_* in %s", c.dir)
	}
	for _, set := range sets {
		if err := runDataSet(c, set); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(set), err)
		}
	}
	return nil
}

// runDataSet loads the case with one data set's integer inputs bound and
// compares every output.
func runDataSet(c *conformanceCase, set string) error {
	m, inputs, err := bindIntegerInputs(c.model, set)
	if err != nil {
		return err
	}
	model, _, err := FromONNX(m, c.dir, LoadOptions{})
	if err != nil {
		return err
	}
	s, err := model.NewSession(SessionOptions{})
	if err != nil {
		return err
	}
	got, err := s.Run(context.Background(), inputs)
	if err != nil {
		return err
	}
	return compareOutputs(c, set, got)
}

// compareOutputs checks a run's outputs against a data set's output_N.pb.
func compareOutputs(c *conformanceCase, set string, got map[string]*Tensor) error {
	for i, vi := range c.model.Graph.Outputs {
		pt, err := onnx.ReadTensor(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			return err
		}
		want, err := tensorFloats(pt)
		if err != nil {
			return err
		}
		if err := compareTensor(got[vi.Name], pt.Shape(), want); err != nil {
			return fmt.Errorf("output %q: %w", vi.Name, err)
		}
	}
	return nil
}

func compareTensor(got *Tensor, shape []int, want []float32) error {
	if got == nil {
		return fmt.Errorf("not produced")
	}
	if !slices.Equal(got.Shape, shape) {
		return fmt.Errorf("shape %s, want %s", formatShape(got.Shape), formatShape(shape))
	}
	bad, first := 0, -1
	for i, w := range want {
		g := got.Data[i]
		if math.IsNaN(float64(g)) && math.IsNaN(float64(w)) {
			continue
		}
		if !(math.Abs(float64(g-w)) <= conformanceATol+conformanceRTol*math.Abs(float64(w))) {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d elements differ; first at flat index %d: got %.8g, want %.8g", bad, len(want), first, got.Data[first], want[first])
	}
	return nil
}

type conformanceTally struct{ passed, raised, skipped, failed int }

func mergeKeys(maps ...map[string]string) map[string]bool {
	keys := map[string]bool{}
	for _, m := range maps {
		for k := range m {
			keys[k] = true
		}
	}
	return keys
}

// TestONNXNodeConformance runs every ONNX node test whose operators are all
// in Ops() and checks the per-operator tally against
// testdata/conformance.txt (go test -run TestONNXNodeConformance -update
// rewrites it).
func TestONNXNodeConformance(t *testing.T) {
	root := testfiles.ONNXNodeTests(t)
	cases := conformanceCases(t, root)
	tally := map[string]*conformanceTally{}
	for _, op := range Ops() {
		tally[op] = &conformanceTally{}
	}
	tally["multi-node"] = &conformanceTally{}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			if _, ok := conformanceRaised[c.name]; ok {
				if err := runCase(c); err == nil {
					t.Errorf("passes at its own opset; remove it from conformanceRaised")
				}
				raised := *c
				raised.model = withOpset(c.model, minOpset)
				if err := runCase(&raised); err != nil {
					tally[c.op].failed++
					t.Fatalf("with opset raised to %d: %v", minOpset, err)
				}
				tally[c.op].raised++
				return
			}
			err := runCase(c)
			if reason, ok := conformanceSkips[c.name]; ok {
				tally[c.op].skipped++
				if err == nil {
					t.Errorf("passes although the skip list says: %s; remove it from conformanceSkips", reason)
				}
				t.Skipf("%s (%v)", reason, err)
			}
			if err != nil {
				tally[c.op].failed++
				t.Fatal(err)
			}
			tally[c.op].passed++
		})
	}
	for name := range mergeKeys(conformanceSkips, conformanceRaised) {
		if !seen[name] {
			t.Errorf("skip list names %s, which is not a node test of supported operators here", name)
		}
	}
	for op, r := range tally {
		if _, ok := conformanceCoveredElsewhere[op]; r.passed+r.raised == 0 && !ok && op != "multi-node" {
			t.Errorf("%s: no node test passes (%d skipped, %d failed)", op, r.skipped, r.failed)
		}
	}
	report := conformanceReport(tally, len(cases))
	t.Log("\n" + report)
	checkGolden(t, filepath.Join("testdata", "conformance.txt"), report)
}

// conformanceReport renders the tally and the skip list, independent of
// where the test data lives.
func conformanceReport(tally map[string]*conformanceTally, cases int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ONNX node tests (libonnx-testdata) of the operators in Ops(): %d cases\n", cases)
	fmt.Fprintf(&b, "pass: every data set within |got-want| <= %g + %g*|want|\n\n", conformanceATol, conformanceRTol)
	fmt.Fprintf(&b, "raised: passed with the model's opset import raised to %d (see below)\n\n", minOpset)
	fmt.Fprintf(&b, "%-18s %6s %6s %7s %6s\n", "op", "passed", "raised", "skipped", "failed")
	ops := make([]string, 0, len(tally))
	for op := range tally {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		r := tally[op]
		fmt.Fprintf(&b, "%-18s %6d %6d %7d %6d\n", op, r.passed, r.raised, r.skipped, r.failed)
	}
	writeReasons(&b, "skipped (deliberately unsupported)", conformanceSkips)
	writeReasons(&b, fmt.Sprintf("raised to opset %d (operator unchanged since the model's opset)", minOpset), conformanceRaised)
	return b.String()
}

func writeReasons(b *strings.Builder, title string, reasons map[string]string) {
	fmt.Fprintf(b, "\n%s:\n", title)
	names := make([]string, 0, len(reasons))
	for name := range reasons {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(b, "  %-48s %s\n", name, reasons[name])
	}
}

// checkGolden compares got with a golden file, or rewrites it under
// -update.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date (run go test -run TestONNXNodeConformance -update); this run:\n%s", path, got)
	}
}

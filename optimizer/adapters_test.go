package optimizer

import (
	"maps"
	"slices"
	"testing"

	"rulebook/rules"
)

// TestAdaptersComplete walks the registry, as internal/layers walks the
// packages: every operator has an adapter, one that lowers it when ONNX
// has the operator and one that says why not when ONNX lacks it, and no
// adapter names an operator the registry lacks.
func TestAdaptersComplete(t *testing.T) {
	names := map[string]bool{}
	for _, op := range rules.All().Ops() {
		names[op.Name] = true
		a, ok := adapters[op.Name]
		switch {
		case !ok || a == nil:
			t.Errorf("%s has no ONNX adapter: add one to adapters, or say there why ONNX has no form of it", op.Name)
		case op.ONNX.None && a.none == "":
			t.Errorf("%s has no ONNX form, but its adapter does not say why", op.Name)
		case op.ONNX.None && (a.lower != nil || len(a.from) > 0):
			t.Errorf("%s has no ONNX form, but its adapter maps or lowers it", op.Name)
		case !op.ONNX.None && a.none != "":
			t.Errorf("%s has the ONNX form %s, but its adapter says it has none: %s", op.Name, op.ONNXType(), a.none)
		case !op.ONNX.None && a.lower == nil:
			t.Errorf("%s has the ONNX form %s, but its adapter does not lower it", op.Name, op.ONNXType())
		}
	}
	for name := range adapters {
		if !names[name] {
			t.Errorf("adapters has %s, which is not a registry operator (any more)", name)
		}
	}
}

// TestAdapterMappings holds each ONNX node type to the registry operator
// it maps onto, and to one only.
func TestAdapterMappings(t *testing.T) {
	want := map[string]string{
		"Add":                        rules.NameEwadd,
		"Mul":                        rules.NameEwmul,
		rules.ONNXBatchNormalization: rules.NameEwmul,
		"Transpose":                  rules.NameTranspose,
		"MatMul":                     rules.NameMatmul,
		rules.ONNXGemm:               rules.NameMatmul,
		"Conv":                       rules.NameConv2D,
		"Relu":                       rules.NameRelu,
		rules.ONNXClip:               rules.NameRelu,
		"AveragePool":                rules.NamePoolAvg,
		"MaxPool":                    rules.NamePoolMax,
		"Concat":                     rules.NameConcat,
	}
	for _, reg := range []*rules.Registry{rules.Default(), rules.All()} {
		got := mappings(reg)
		if types := slices.Sorted(maps.Keys(got)); !slices.Equal(types, slices.Sorted(maps.Keys(want))) {
			t.Errorf("mapped ONNX types %v, want %v", types, slices.Sorted(maps.Keys(want)))
		}
		for typ, op := range want {
			if got[typ].op != op {
				t.Errorf("%s maps onto %q, want %s", typ, got[typ].op, op)
			}
		}
	}
	seen := map[string]string{}
	for _, op := range rules.All().Ops() {
		a := adapters[op.Name]
		if a == nil {
			continue // TestAdaptersComplete says so
		}
		for _, m := range a.from {
			typ := m.onnxType
			if typ == "" {
				typ = op.ONNXType()
			}
			if prev, ok := seen[typ]; ok {
				t.Errorf("%s maps onto both %s and %s", typ, prev, op.Name)
			}
			seen[typ] = op.Name
		}
	}
}

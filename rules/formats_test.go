package rules_test

import (
	"slices"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestEveryOperatorNamesItsForms walks the registry: every operator has its
// name in ONNX, in TASO's protobuf and in FlexFlow's JSON, or says None,
// and the names lead back to it.
func TestEveryOperatorNamesItsForms(t *testing.T) {
	reg := rules.Default()
	for _, op := range reg.Ops() {
		checkONNXForm(t, op)
		checkTASOForm(t, reg, op)
		checkFlexFlowForm(t, reg, op)
	}
}

func checkONNXForm(t *testing.T, op *rules.Op) {
	t.Helper()
	f := op.ONNX
	switch {
	case f.None && (len(f.Types) > 0 || len(f.Attrs) > 0):
		t.Errorf("%s: ONNX says None and names %v %v", op.Name, f.Types, f.Attrs)
	case !f.None && len(f.Types) == 0:
		t.Errorf("%s: no ONNX node type, and no explicit None", op.Name)
	case !f.None && slices.Contains(f.Types, ""):
		t.Errorf("%s: an empty ONNX node type in %q", op.Name, f.Types)
	case (op.ONNXType() == "") != f.None:
		t.Errorf("%s: ONNXType %q with None %v", op.Name, op.ONNXType(), f.None)
	}
}

func checkTASOForm(t *testing.T, reg *rules.Registry, op *rules.Op) {
	t.Helper()
	f := op.TASO
	if f.None {
		if f.Name != "" || f.Type != 0 || f.Params != nil || f.Required != nil || f.Operands != nil {
			t.Errorf("%s: TASO says None and names %+v", op.Name, f)
		}
		return
	}
	if !strings.HasPrefix(f.Name, "OP_") {
		t.Errorf("%s: TASO type name %q, and no explicit None", op.Name, f.Name)
	}
	if got, ok := reg.LookupTASO(f.Type); !ok || got != op {
		t.Errorf("%s: TASO type %d finds %v", op.Name, f.Type, got)
	}
	if name, _ := rules.TASOTypeName(f.Type); name != f.Name {
		t.Errorf("%s: TASO type %d is named %q, the row says %q", op.Name, f.Type, name, f.Name)
	}
	if len(f.Operands) == 0 || f.Operands[0] != op.Arity {
		t.Errorf("%s: TASO operand counts %v do not start with the arity %d", op.Name, f.Operands, op.Arity)
	}
	for _, k := range slices.Concat(f.Params, f.Required) {
		if !strings.HasPrefix(k.String(), "PM_") {
			t.Errorf("%s: TASO parameter %s is not one of TASO's keys", op.Name, k)
		}
	}
	for _, k := range f.Required {
		if !slices.Contains(f.Params, k) {
			t.Errorf("%s: required TASO parameter %s is not among those allowed", op.Name, k)
		}
	}
}

func checkFlexFlowForm(t *testing.T, reg *rules.Registry, op *rules.Op) {
	t.Helper()
	f := op.FlexFlow
	if f.None {
		if f.Type != "" || f.Aliases != nil || f.Params != nil {
			t.Errorf("%s: FlexFlow says None and names %+v", op.Name, f)
		}
		return
	}
	if !strings.HasPrefix(f.Type, "OP_") {
		t.Errorf("%s: FlexFlow type %q, and no explicit None", op.Name, f.Type)
	}
	for _, name := range append([]string{f.Type}, f.Aliases...) {
		if got, ok := reg.LookupFlexFlow(name); !ok || got != op {
			t.Errorf("%s: FlexFlow type %q finds %v", op.Name, name, got)
		}
	}
	for _, name := range f.Params {
		if _, ok := rules.TASOParamNamed(name); !ok {
			t.Errorf("%s: FlexFlow parameter %q is not one of TASO's keys", op.Name, name)
		}
	}
	// FlexFlow's JSON renders TASO's schema: the same types and keys, by
	// name. A difference is a typo in one of the two.
	if op.TASO.None {
		return
	}
	if f.Type != op.TASO.Name {
		t.Errorf("%s: FlexFlow type %q, TASO's %q", op.Name, f.Type, op.TASO.Name)
	}
	var tasoNames []string
	for _, k := range op.TASO.Params {
		tasoNames = append(tasoNames, k.String())
	}
	if !slices.Equal(f.Params, tasoNames) {
		t.Errorf("%s: FlexFlow parameters %v, TASO's %v", op.Name, f.Params, tasoNames)
	}
}

// TestForeignTypesAreNamedOnce checks that TASO's enum, the registry's
// types and the unsupported ones together, gives each number and each
// name once, and that every parameter key reads back from its name.
func TestForeignTypesAreNamedOnce(t *testing.T) {
	byType, byName := map[rules.TASOType]string{}, map[string]rules.TASOType{}
	add := func(typ rules.TASOType, name string) {
		if prev, dup := byType[typ]; dup {
			t.Errorf("TASO type %d is %s and %s", typ, prev, name)
		}
		if prev, dup := byName[name]; dup {
			t.Errorf("%s is TASO types %d and %d", name, prev, typ)
		}
		byType[typ], byName[name] = name, typ
	}
	for _, op := range rules.Default().Ops() {
		if !op.TASO.None {
			add(op.TASO.Type, op.TASO.Name)
		}
	}
	for _, f := range rules.UnsupportedForeignOps() {
		add(f.TASO, f.Name)
		if name, ok := rules.TASOTypeName(f.TASO); !ok || name != f.Name {
			t.Errorf("TASO type %d is named %q, want %q", f.TASO, name, f.Name)
		}
		if op, ok := rules.Default().LookupFlexFlow(f.Name); ok {
			t.Errorf("unsupported %s finds %s", f.Name, op.Name)
		}
	}
	for k := rules.PMOpType; k <= rules.PMParallelDegree; k++ {
		if back, ok := rules.TASOParamNamed(k.String()); !ok || back != k {
			t.Errorf("parameter %d is named %s, which reads back as %d", k, k, back)
		}
	}
	if name := rules.TASOParam(99).String(); name != "key 99" {
		t.Errorf("parameter 99 is named %q", name)
	}
}

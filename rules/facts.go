package rules

import "slices"

// MissingFacts names the facts op's row lacks, so that a registry test
// fails on a row that leaves one out. Every consumer reads these from the
// row: names and documentation, typed parameters, shapes and kernels, the
// verifier's pointwise class, the cost, the parallel layout rule and the
// TASO and FlexFlow encodings. (The optimizer's ONNX adapters need ONNX's
// types and are held complete by the optimizer's own test.)
func (op *Op) MissingFacts() []string {
	var missing []string
	lacks := func(fact string, absent bool) {
		if absent {
			missing = append(missing, fact)
		}
	}
	lacks("name", op.Name == "")
	lacks("doc", op.Doc == "")
	lacks("Z3 symbols", len(op.Z3) != op.Outputs || slices.Contains(op.Z3, ""))
	lacks("typed parameters (Attrs)", checkAttrs(op) != nil)
	lacks("shape rule", op.Shape == nil)
	lacks("kernels", op.IntKernel == nil || op.FloatKernel == nil)
	lacks("pointwise class", op.Pointwise == PointwiseUnset)
	lacks("cost", op.Cost == CostUnset)
	lacks("layout rule", op.Layout == nil && !op.IsConstant())
	lacks("ONNX form", !op.ONNX.None && len(op.ONNX.Types) == 0)
	lacks("TASO form", !op.TASO.None && op.TASO.Name == "")
	lacks("FlexFlow form", !op.FlexFlow.None && op.FlexFlow.Type == "")
	formed := !op.TASO.None || !op.FlexFlow.None
	lacks("TASO/FlexFlow key encoding", formed && (op.Keys.Encode == nil || op.Keys.Decode == nil))
	return missing
}

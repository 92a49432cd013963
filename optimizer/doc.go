// Package optimizer rewrites ONNX models with one pinned, hash-checked
// version of the rules (TASO §2.7) and writes the cheaper model back.
//
// The steps, in the order a model goes through them:
//
//   - version.Set is the version, loaded and hash-checked by package
//     version from the store or an exported JSON file.
//   - Graph is the model in the registry's terms (FromONNX, LoadModel): ONNX
//     nodes whose meaning is exactly a registry operator's become that
//     operator, every other node stays opaque and no rule crosses it.
//   - Optimize is TASO's cost-based backtracking search: it applies the
//     rules in both directions where their inputs have the ranks the rules
//     hold at (variants.go says when a rule holds at other ranks), keeps
//     results that type-check, and expands the cheapest graph first. It
//     builds only the graphs it expands: a neighbour is keyed,
//     type-checked and priced from what its rewrite changed (neighbours.go),
//     to the same key, verdict and cost as the built graph.
//   - A CostModel prices a graph: Analytic from FLOPs, bytes and launches,
//     or Measured from the runtime's timings, cached in the store
//     (CostCache); a measured gain is timed again side by side before it is
//     kept (Confirmer).
//   - Graph.ToONNX lowers the result back to ONNX, folding weight-only
//     subgraphs into initializers (ToONNXKeepingExternal keeps the input's
//     references to external weights it writes unchanged); Report
//     (NewReport, docs/optimize-report.md) says what was applied and what
//     it saved, and MeasureSideBySide times both models.
//
// Job runs all of it for one model file, as 'rulebook optimize' does; a
// cancelled context stops any phase at once, and the Job still writes the
// best graph found so far (InterruptedError).
package optimizer

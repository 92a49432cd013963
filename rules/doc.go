// Package rules is what every other package agrees on: which operators
// exist, what a graph of them is, what a rule is and how it is written.
// It imports no other package of rulebook, and all of them build on it.
//
// # The registry
//
// A Registry is an operator set, and the only place that defines an
// operator. Each Op row holds everything anyone needs to know about it:
//
//   - its arity and operands (Op.Operands), with the roles the generator
//     respects: data, weight, scalar, and inputs-only operands;
//   - its integer parameters (ParamSpec): bounds, symbolic values such as
//     padding "same", "valid" and "sym", named values such as conv2d's groups "dw",
//     and the values the generator enumerates and the axiom check tries;
//   - shape inference (Op.InferShapes), which also carries each axis's
//     concat history (SplitTree) so that split can undo the latest concat;
//   - two kernels written once against Ring: an exact one on integers
//     modulo Prime (Mod), which fingerprints use, and a float64 one (Real),
//     which the concrete checks use;
//   - its Z3 function symbols (Op.Z3), which the axioms, the verifier and
//     rule text use;
//   - its names in ONNX, TASO's protobuf and FlexFlow's JSON (ONNXForm,
//     TASOForm, FlexFlowForm), so that the optimizer and the exchange codecs
//     spell none themselves, and a test holds them to it;
//   - how its parameters become TASO's keys and back (Op.Keys) and what it
//     says of its tensors' ranks (Op.Ranks), which the exchange codecs read.
//
// Default is TASO's operator set (its Table 2.1); Registry.Select takes a
// subset for a narrower generation. A registry never changes once built.
//
// # Graphs and rules
//
// A Graph is a DAG of Nodes in topological order with explicit outputs. A
// Value names either a graph input or one output of a node; a graph only
// counts its inputs, because the two sides of a rule share them. Evaluate
// runs a graph on concrete tensors in either arithmetic.
//
// A Rule is two graphs, Src and Dst, that compute the same outputs, position
// by position, from the same inputs, with the input shapes it was found at
// when known. Rules are shape-agnostic otherwise: Rule.EachShapes and
// Rule.FindShapes look for other shapes under which both sides type-check.
//
// # Canonical text and Text
//
// A rule is written as s-expressions over the Z3 symbols (the grammar is at
// the top of parse.go):
//
//	(ewadd (matmul ?a ?b) (matmul ?a ?c)) => (matmul ?a (ewadd ?b ?c))
//
// Rule.Canonical renames inputs, orders nodes and outputs so that rules
// equal up to those choices get the same text; Rule.Oriented also puts the
// larger side first, so a rule and its mirror image are one rule. ParseRule
// and ParseGraph read text back.
//
// Text is the one record of a rule outside memory: its two sides as text
// and its shapes ("?a:2x4 ?b:4x4"). Exchange files hold it and the store's
// rules embed it. NewText and ParseText parse and check it once; a Text
// that arrives as plain fields (decoded JSON, a database row) is checked
// with Text.Checked before Text.Rule is used. Text.Hash, over the canonical
// text, is a rule's identity.
//
// # Statuses and the input pool
//
// Status is where a rule stands: candidate (found, and true on concrete
// inputs), then proved, refuted or unknown after verification. The store
// keeps these values.
//
// Pool is TASO's input pool: families of interchangeable inputs
// (InputClass) of fixed shapes and roles (Role), and the shapes offered to
// constants; Op.Takes says which roles an operand takes. The generator
// enumerates over DefaultPool, TASO's grown where its operator properties
// need more copies of one shape, and rules imported from TASO take their
// shapes from it.
package rules

// Package runtime executes ONNX models in float32, on the CPU (Session) or
// on an NVIDIA GPU (CUDASession, through package cuda).
//
// Load checks a model, infers its shapes and folds its constants into a
// Model. A Session plans every buffer once, so a Run allocates only its
// outputs. Absent external weights can be generated from a seed.
// docs/runtime.md tells the long story: loading, sessions, generated
// weights, and the operators supported.
package runtime

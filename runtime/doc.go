// Package runtime executes ONNX models in float32, on the CPU (Session) or
// on an NVIDIA GPU (CUDASession, through package cuda).
//
// Load (or FromONNX) turns an ONNX model into a Model: the graph is checked
// (opset, operator set, every value defined), integer-typed constants that
// steer shapes (Reshape shapes, Split sizes, Pad pads, reduction axes) are
// read at load, every node's output shape is inferred, Constant nodes and
// initializer-only subgraphs are folded, Identity nodes are elided and the
// remaining nodes are put in topological order.
//
// A Session executes a Model. NewSession plans the buffers of all
// intermediate tensors once (each buffer is reused as soon as the tensor
// it held has had its last use) and binds every node to its tensors, so a
// Run allocates nothing but the output tensors it returns. Work inside a
// node is split over SessionOptions.Threads goroutines; matrix products go
// through package gemm's AVX-512 kernels on as many goroutines.
//
// A CUDASession runs the same plan on a GPU: device buffers planned once,
// our CUDA C kernels compiled with NVRTC at first use, cuBLAS for matrix
// products, and the CPU kernel for any node a GPU kernel cannot take
// (listed by Fallbacks). Without CUDA it fails with cuda.ErrUnavailable.
//
// Weights kept in an external file that is absent can be generated from a
// seed (LoadOptions.Weights), which makes the runtime usable for timing
// model architectures whose weights were not shipped; LoadReport says which
// initializers were generated.
//
// Supported: the default ONNX domain at opsets 7 through 21, float32
// tensors, and the operators listed by Ops: those of the torchvision and
// BERT exports (Conv, pools, Gemm, MatMul, elementwise arithmetic,
// Softmax, ReduceMean, shape operators), plus the unary activations and
// math functions, the reductions, variadic Sum/Max/Min/Mean,
// BatchNormalization, LayerNormalization and Dropout (inference),
// Squeeze, Unsqueeze, Expand, and Shape, Gather and Slice (shape
// arithmetic on integer constants folds exactly at load; Gather and Slice
// on activations run). Integer tensors appear only as constants that
// steer shapes.
// testdata/conformance.txt is the per-operator tally of ONNX's own node
// tests.
package runtime

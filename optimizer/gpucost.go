package optimizer

import (
	"fmt"

	"rulebook/rules"
	"rulebook/runtime"
)

// GPU is an analytic cost model of one CUDA GPU, for searching without
// one: it is modelled, not measured. A GPU runs a graph as a stream of
// kernels, so each node that does work costs a launch, and its kernel
// takes the longer of its arithmetic at the product throughput and its
// bytes at the memory bandwidth (the two overlap on a GPU, where they add
// on a CPU core), but never less than MinKernel: a small kernel cannot
// fill the GPU's multiprocessors, and its time does not shrink with its
// work. What runs for free:
//
//   - views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout):
//     no kernel, the output shares the input's memory;
//   - epilogues: a channel bias or other weight added to a convolution's
//     or a product's output, and a relu after a convolution, a product or
//     an addition, run inside that kernel's output pass, as cuDNN's fused
//     convolutions and cuBLASLt's bias and relu epilogues run them;
//   - nodes computed from weights alone, folded before the model runs.
//
// So fewer, larger kernels are cheaper on a GPU where the CPU model
// (Analytic) may see only the extra arithmetic. H200 gives the constants
// of an NVIDIA H200 and says where they come from.
type GPU struct {
	// Device names the GPU modelled, as cost tables key a CUDA device
	// ("cuda/NAME", see runtime.CUDASession.DeviceKey).
	Device    string
	FLOPS     float64 // products' sustained float32 throughput; multiply-adds count as 2
	Bandwidth float64 // sustained memory bandwidth, bytes per second
	Launch    float64 // seconds to issue one kernel
	MinKernel float64 // seconds of the shortest kernel
}

// H200 models an NVIDIA H200 (SXM, 141 GB HBM3e) running float32 models
// with TF32 off, as the runtime's CUDA backend runs them. The constants:
//
//   - FLOPS 35e12: the public float32 peak is 67 TFLOP/s (NVIDIA's H200
//     datasheet); the measured profile ../shared/devices/h200-torch2.11-ops.csv
//     shows cuBLAS products reaching 20–50 TFLOP/s (50 only at 8192-wide
//     matrices) and cuDNN convolutions 19–49, 24 typical, so about half
//     the peak.
//   - Bandwidth 3.7e12: the public HBM3e peak is 4.8 TB/s; the profile's
//     large elementwise operators (relu, add, softmax over 65536×1024)
//     move 3.5–3.95 TB/s, about 77% of it.
//   - Launch 4e-6: issuing a kernel costs the host a few microseconds
//     (cudaLaunchKernel's usual 2–5 µs; CUDA's documentation and the
//     profile's smallest operators, 19–22 µs with a synchronise and
//     PyTorch's dispatch included).
//   - MinKernel 3e-6: the shortest kernels of the profile still take a
//     few microseconds once dispatch is taken off; a kernel over a few
//     thousand elements leaves most of the 132 multiprocessors idle.
//
// TestGPUModelAgainstProfile checks the model's prices against every
// float32 row of the profile it can express as a graph.
func H200() GPU {
	return GPU{Device: "cuda/NVIDIA H200", FLOPS: 35e12, Bandwidth: 3.7e12, Launch: 4e-6, MinKernel: 3e-6}
}

// Cost is the graph's modelled time in milliseconds.
func (m GPU) Cost(g *Graph) float64 { return sumPrices(g, m) }

func (m GPU) price(g *Graph, i, _ int, weight []bool) float64 {
	n := &g.G.Nodes[i]
	if isView(g, n) || fusedEpilogue(g, n, weight) {
		return 0
	}
	flops, bytes := nodeWork(g, i)
	return (m.Launch + max(m.MinKernel, flops/m.FLOPS, bytes/m.Bandwidth)) * 1e3
}

// isView reports whether n is an operator a GPU runtime runs as no
// kernel (runtime.IsView).
func isView(g *Graph, n *rules.Node) bool {
	o, ok := g.opaqueOf(n)
	return ok && runtime.IsView(o.node.OpType)
}

// fusedEpilogue reports whether node n runs inside the kernel that
// computes its operand on a GPU: a relu after a convolution, a product or
// an addition, or a weight (a bias) added to a convolution or a product.
// Like fusedRelu it does not look at how many read the operand.
func fusedEpilogue(g *Graph, n *rules.Node, weight []bool) bool {
	producer := func(a rules.Value) string {
		if a.IsInput() || weight[a.Node] {
			return ""
		}
		return g.G.Nodes[a.Node].Op.Name
	}
	switch n.Op.Name {
	case rules.NameRelu:
		switch producer(n.Args[0]) {
		case rules.NameConv2D, rules.NameMatmul, rules.NameLinear, rules.NameEwadd:
			return true
		}
	case rules.NameEwadd:
		for k := range 2 {
			switch producer(n.Args[k]) {
			case rules.NameConv2D, rules.NameMatmul, rules.NameLinear:
				if g.isWeight(n.Args[1-k], weight) {
					return true
				}
			}
		}
	}
	return false
}

// isWeight reports whether v is a weight or computed from weights alone.
func (g *Graph) isWeight(v rules.Value, weight []bool) bool {
	if v.IsInput() {
		return g.Inputs[v.Input()].IsWeight()
	}
	return weight[v.Node]
}

// nodeWork is node i's arithmetic and the bytes it moves, the registry's
// count with each broadcast weight read at its stored size.
func nodeWork(g *Graph, i int) (flops, bytes float64) {
	n := &g.G.Nodes[i]
	var buf [4]rules.Shape // Work keeps no operand: the shapes stay on the stack
	in := buf[:0]
	stored := 0 // bytes a compact weight saves against its full shape
	for k, arg := range n.Args {
		in = append(in, g.shapeOf(arg))
		if arg.IsInput() && g.Inputs[arg.Input()].Compact != nil {
			stored += rules.ElementBytes * (len(g.Inputs[arg.Input()].Compact.Data) - in[k].Size())
		}
	}
	w := n.Op.Work(n.Params, in, g.Shapes[i])
	return w.FLOPs, w.Bytes + float64(stored)
}

// CostDevice names the device whose costs price a search for target
// (runtime.BackendCPU or runtime.BackendCUDA) with cost ("analytic" or
// "measured"), as cost tables key it: the CPU runtime with threads
// threads ("cpu/2"), the GPU H200 models ("cuda/NVIDIA H200"), or the GPU
// the CUDA backend finds. Measured GPU costs need a GPU: without one the
// error is the runtime's, before anything is read or written.
func CostDevice(target, cost string, threads int) (string, error) {
	switch {
	case target == runtime.BackendCPU:
		return runtime.CPUDevice(threads), nil
	case target != runtime.BackendCUDA:
		return "", fmt.Errorf("unknown device %q (known: cpu, cuda)", target)
	case cost == "measured":
		return runtime.CUDADevice()
	}
	return H200().Device, nil
}

package cluster

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/checked"
)

// TestParse: presets, files, and one clear line for each bad input.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		spec    string
		devices int
		err     string
	}{
		{"summit:16", 96, ""},
		{"summit", 6, ""},
		{"dgx-a100:2", 16, ""},
		{"h100:4", 32, ""},
		{"cpu", 1, ""},
		{"testdata/good.json", 16, ""},
		{"tpu:4", 0, `unknown machine preset "tpu" (known: cpu, dgx-a100, h100, h200, summit; or a machine .json file)`},
		{"summit:x", 0, `node count "x" is not a number`},
		{"summit:0", 0, "want at least 1 node"},
		{"testdata/zero-devices.json", 0, "testdata/zero-devices.json: devices_per_node is 0; want 1 to 65536"},
		{"testdata/negative-bandwidth.json", 0, "testdata/negative-bandwidth.json: intra_node.bandwidth is -1e+10; want a number from 1000 to 1e+18"},
		{"testdata/unknown-field.json", 0, `unknown field "devices_per_nodes"`},
		{"testdata/missing.json", 0, "no such file"},
		// Part of a node: a workstation, or the GPUs a job was given.
		{"h100:1x1", 1, ""},
		{"h100:1x2", 2, ""},
		{"dgx-a100:2x4", 8, ""},
		{"summit:1x6", 6, ""},
		{"h100:1x9", 0, "machine h100:1: a node has 8 devices (H100-SXM5-80GB); want 1 to 8 in NODESxDEVICES, got 9"},
		{"h100:1x0", 0, "want 1 to 8 in NODESxDEVICES, got 0"},
		{"h100:1xq", 0, `device count "q" is not a number`},
		{"h100:x2", 0, `node count "x2" is not a number`},
		{"h100:0x2", 0, "want at least 1 node"},
	} {
		m, err := Parse(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %v, want one line containing %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || m.NumDevices() != c.devices {
			t.Errorf("%s: %d devices, %v; want %d", c.spec, m.NumDevices(), err, c.devices)
		}
	}
}

// TestAllReduceBusBandwidth: the α–β ring all-reduce reproduces the shape
// of NCCL's all_reduce_perf curve: bus bandwidth is latency-bound for small
// messages, grows with the message and approaches the link bandwidth for
// large ones, with half of it where the bandwidth term equals the latency
// term, S = n·α·B.
func TestAllReduceBusBandwidth(t *testing.T) {
	m, _ := Preset("dgx-a100", 1)
	g := Group{0, 1, 2, 3, 4, 5, 6, 7}
	n := len(g)
	bw := func(s float64) float64 { return BusBandwidth(n, s, m.AllReduce(g, s)) }
	prev := 0.0
	for s := 1024.0; s <= 1<<30; s *= 2 {
		b := bw(s)
		if b < prev {
			t.Errorf("bus bandwidth falls from %.3g to %.3g B/s at %g bytes", prev, b, s)
		}
		prev = b
	}
	B := m.IntraNode.Bandwidth
	if got := bw(1 << 30); got < 0.99*B || got > B {
		t.Errorf("bus bandwidth at 1 GiB: %.4g B/s, want within 1%% below the link's %.4g", got, B)
	}
	if got := bw(8 << 10); got > 0.05*B {
		t.Errorf("bus bandwidth at 8 KiB: %.4g B/s, want latency-bound (under 5%% of %.4g)", got, B)
	}
	half := float64(n) * m.IntraNode.Latency * B
	if got := bw(half); math.Abs(got-B/2) > 1e-6*B {
		t.Errorf("bus bandwidth at S = n·α·B = %.4g bytes: %.6g, want B/2 = %.6g", half, got, B/2)
	}
}

// TestBusBandwidthAgainstNCCLTests holds the simulated all-reduce bus
// bandwidth of 1 GiB over every device of two nodes within 25% of the
// bus bandwidth nccl-tests' all_reduce_perf measured on such nodes. A
// model that gave each device the node's network divided by its members
// (the planner's before issue 27) is 6–8× below these figures.
func TestBusBandwidthAgainstNCCLTests(t *testing.T) {
	// Two nodes of 8 A100 on NVSwitch with 4 HDR NICs each, as in
	// NVIDIA/nccl#1048 (86 GB/s) and NVIDIA/nccl-tests#119 (84.8 GB/s
	// average, 96 GB/s peak): 232 GB/s within a node (nccl#1048's
	// single-node figure) and 4 × 24 GB/s per node, nccl-tests' figure for
	// one HDR NIC (NVIDIA/nccl-tests#252).
	fourNICs, err := Decode([]byte(`{"name": "a100-4hdr", "nodes": 2, "devices_per_node": 8,
 "device": {"name": "A100-SXM4-40GB", "peak_flops": 19.5e12, "memory_bandwidth": 1.6e12, "memory_bytes": 42949672960},
 "intra_node": {"bandwidth": 232e9, "latency": 3e-6}, "inter_node": {"bandwidth": 96e9, "latency": 5e-6}}`))
	if err != nil {
		t.Fatal(err)
	}
	dgxA100, _ := Parse("dgx-a100:2")
	h100, _ := Parse("h100:2")
	for _, c := range []struct {
		machine   Machine
		published float64 // bytes/s
		source    string
	}{
		{dgxA100, 192e9, "NVIDIA/nccl#812: two DGX A100, 8 × HDR each, 192 GB/s measured by NVIDIA"},
		{h100, 8 * 47e9, "NVIDIA/nccl-tests#290: 46–48 GB/s per NDR NIC, 8 NICs per DGX H100"},
		{fourNICs, 86e9, "NVIDIA/nccl#1048: two A100 nodes with 4 HDR NICs each, 86 GB/s"},
	} {
		n := c.machine.NumDevices()
		g := make(Group, n)
		for i := range g {
			g[i] = i
		}
		const s = 1 << 30
		got := BusBandwidth(n, s, c.machine.AllReduce(g, s))
		if ratio := got / c.published; ratio < 0.75 || ratio > 1.25 {
			t.Errorf("%s: simulated bus bandwidth of a 1 GiB all-reduce over %d devices is %.1f GB/s, published %.1f GB/s (%s); ratio %.2f, want within 25%%",
				c.machine.Name, n, got/1e9, c.published/1e9, c.source, ratio)
		}
	}
}

// TestSpanningGroupPaysNetwork: a group within one node costs the same on
// any node and nothing of the network; the same number of devices spread
// over two nodes pays the network's bandwidth and latency. On summit:2
// the tensor-parallel group {4,5,6,7} of dp3×tp4 spans both nodes.
func TestSpanningGroupPaysNetwork(t *testing.T) {
	m, _ := Preset("summit", 2)
	slow := m
	slow.InterNode = Link{Bandwidth: m.InterNode.Bandwidth / 10, Latency: m.InterNode.Latency * 10}
	for _, s := range []float64{1 << 10, 1 << 20, 256 << 20} {
		for _, c := range []struct {
			name  string
			group Group
			spans bool
		}{
			{"first node", Group{0, 1, 2, 3}, false},
			{"second node", Group{6, 7, 8, 9}, false},
			{"across", Group{4, 5, 6, 7}, true},
		} {
			fast, slower := m.AllReduce(c.group, s), slow.AllReduce(c.group, s)
			if c.spans != (slower > fast) || m.Place(c.group).Spans() != c.spans {
				t.Errorf("%s %v, %g bytes: %.4g s, %.4g s with a 10× slower network; spans nodes: %v", c.name, c.group, s, fast, slower, c.spans)
			}
			if inside := m.AllReduce(Group{0, 1, 2, 3}, s); c.spans && fast <= inside {
				t.Errorf("%v: %.4g s, no more than the same group inside a node (%.4g s)", c.group, fast, inside)
			}
		}
	}
	if m.AllReduce(Group{3}, 1<<20) != 0 || m.PointToPoint(2, 2, 1<<20) != 0 {
		t.Error("a collective of one device costs time")
	}
	if m.PointToPoint(0, 5, 1<<20) >= m.PointToPoint(0, 6, 1<<20) {
		t.Error("a send within a node costs no less than one across nodes")
	}
}

// TestRingOrTree: a small all-reduce over 16 nodes takes the tree, whose
// latency grows with log₂ of the nodes; a large one over two nodes, and
// any within a node, take the ring, which moves fewer bytes. AllReduce is
// the cheaper of the two.
func TestRingOrTree(t *testing.T) {
	for _, c := range []struct {
		nodes int
		bytes float64
		tree  bool
	}{
		{16, 8 << 10, true},
		{16, 1 << 20, true},
		{2, 1 << 30, false},
		{1, 8 << 10, false},
		{1, 1 << 30, false},
	} {
		m, _ := Preset("dgx-a100", c.nodes)
		g := make(Group, m.NumDevices())
		for i := range g {
			g[i] = i
		}
		p := m.Place(g)
		ring, tree := m.ringAllReduce(p, c.bytes), m.treeAllReduce(p, c.bytes)
		if (tree < ring) != c.tree || m.AllReduce(g, c.bytes) != min(ring, tree) {
			t.Errorf("%s, %g bytes: ring %.4g s, tree %.4g s, chosen %.4g s; want the tree: %v", m.Name, c.bytes, ring, tree, m.AllReduce(g, c.bytes), c.tree)
		}
	}
}

// FuzzDecode: any bytes give a valid machine or an error, never a panic.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"testdata/good.json", "testdata/zero-devices.json", "testdata/negative-bandwidth.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		if m.Validate() != nil {
			t.Errorf("Decode accepted an invalid machine: %+v", m)
		}
		checkMachine(t, m)
	})
}

// TestHostileMachines: machine files whose counts overflow or exceed
// MaxDevices, and rates that are tiny, huge or negative, are refused with
// checked.ErrRange, naming the file and the field; so are presets with
// more nodes than MaxDevices allows.
func TestHostileMachines(t *testing.T) {
	dir := t.TempDir()
	file := func(nodes, perNode, flops, intraBW, interLatency string) string {
		return `{"name": "h", "nodes": ` + nodes + `, "devices_per_node": ` + perNode + `,
 "device": {"name": "X", "peak_flops": ` + flops + `, "memory_bandwidth": 1e11, "memory_bytes": 1e9},
 "intra_node": {"bandwidth": ` + intraBW + `, "latency": 1e-6},
 "inter_node": {"bandwidth": 1e9, "latency": ` + interLatency + `}}`
	}
	for _, c := range []struct {
		name, text, field string
	}{
		{"overflow", file("4611686018427387904", "4", "1e12", "1e10", "1e-5"), "nodes"},
		{"product-overflow", file("65536", "4611686018427387904", "1e12", "1e10", "1e-5"), "devices_per_node"},
		{"2^31-squared", file("2147483648", "2147483648", "1e12", "1e10", "1e-5"), "nodes"},
		{"too-many-devices", file("65536", "8", "1e12", "1e10", "1e-5"), "nodes × devices_per_node"},
		{"tiny-flops", file("1", "4", "1e-300", "1e10", "1e-5"), "device.peak_flops"},
		{"huge-flops", file("1", "4", "1e300", "1e10", "1e-5"), "device.peak_flops"},
		{"tiny-bandwidth", file("1", "4", "1e12", "1e-300", "1e-5"), "intra_node.bandwidth"},
		{"negative-latency", file("2", "4", "1e12", "1e10", "-1e-5"), "inter_node.latency"},
		{"huge-latency", file("2", "4", "1e12", "1e10", "1e300"), "inter_node.latency"},
	} {
		path := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Parse(path)
		if !errors.Is(err, checked.ErrRange) || !strings.HasPrefix(err.Error(), path+": "+c.field+" is ") {
			t.Errorf("%s: %v; want checked.ErrRange naming %s and %s", c.name, err, path, c.field)
		}
	}
	for _, spec := range []string{"summit:100000", "h100:9223372036854775807"} {
		if _, err := Parse(spec); !errors.Is(err, checked.ErrRange) {
			t.Errorf("%s: %v; want checked.ErrRange", spec, err)
		}
	}
}

// FuzzParse: a --machine spec that names no file gives a machine a planner
// can use, or an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"summit", "summit:16", "dgx-a100:2", "h100:4", "cpu", "cpu:0", "tpu:4", "summit:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if strings.HasSuffix(spec, ".json") || strings.ContainsRune(spec, os.PathSeparator) {
			return // a file: FuzzDecode reads those
		}
		m, err := Parse(spec)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Errorf("%q gives an invalid machine: %v", spec, err)
		}
		checkMachine(t, m)
	})
}

// checkMachine holds what a planner relies on: at least one device, and
// collectives that cost a number of seconds, not negative.
func checkMachine(t *testing.T, m Machine) {
	n := m.NumDevices()
	if n < 1 || n/m.Nodes != m.DevicesPerNode {
		t.Fatalf("%d nodes of %d devices count %d devices", m.Nodes, m.DevicesPerNode, n)
	}
	for _, g := range []Group{{0, n - 1}, {0, m.DevicesPerNode - 1}} {
		for _, c := range []float64{m.AllReduce(g, 1<<20), m.AllGather(g, 1<<20), m.PointToPoint(g[0], g[1], 1<<20)} {
			if c < 0 || math.IsNaN(c) {
				t.Fatalf("%+v: a collective over %v costs %g s", m, g, c)
			}
		}
	}
}

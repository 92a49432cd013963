// Package cluster describes a machine for the planner and prices
// collectives on it. A machine is nodes of identical devices, a link inside
// each node and a network between nodes. Collectives over device groups
// are priced as NCCL runs them: rings or trees, whichever is cheaper, with
// a ring that crosses nodes using its members' share of the node's NICs. Parse reads a preset or a JSON machine file, and Validate
// states the range of every field. docs/planner.md ("Machine model" and
// "Cost model") gives the file format and the formulas.
package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"rulebook/internal/checked"
	"rulebook/internal/infile"
)

// Device is one accelerator. PeakFLOPS is its fp32 peak without tensor
// cores; the other peaks are its dense tensor-core peaks per precision,
// 0 where it has none (a V100 has no bf16 and no tf32).
type Device struct {
	Name            string  `json:"name"`
	PeakFLOPS       float64 `json:"peak_flops"`
	PeakBF16        float64 `json:"peak_flops_bf16,omitempty"`
	PeakFP16        float64 `json:"peak_flops_fp16,omitempty"`
	PeakTF32        float64 `json:"peak_flops_tf32,omitempty"`
	MemoryBandwidth float64 `json:"memory_bandwidth"`
	MemoryBytes     float64 `json:"memory_bytes"`
}

// Link is a connection's bandwidth (bytes/s per direction) and latency (s).
type Link struct {
	Bandwidth float64 `json:"bandwidth"`
	Latency   float64 `json:"latency"`
}

// Machine is Nodes nodes of DevicesPerNode identical devices. Devices are
// numbered node by node: device d is on node d / DevicesPerNode.
type Machine struct {
	Name           string `json:"name"`
	Nodes          int    `json:"nodes"`
	DevicesPerNode int    `json:"devices_per_node"`
	Device         Device `json:"device"`
	IntraNode      Link   `json:"intra_node"`
	InterNode      Link   `json:"inter_node"`
}

// NumDevices is the number of devices in the machine. Validate bounds it
// by MaxDevices, so the product cannot overflow on a validated machine.
func (m Machine) NumDevices() int { return m.Nodes * m.DevicesPerNode }

// MaxDevices bounds a machine's devices: the planner's task graphs, device
// groups and sharding annotations grow with the device count, and past
// this a plan takes minutes and gigabytes. The largest published
// training machines are within it.
const MaxDevices = 1 << 16

// The ranges a device and its links must lie in. They are far wider than
// any hardware, and narrow enough that every time and size the planner
// derives from them (work over a rate, bytes over a bandwidth) stays a
// finite number.
const (
	minRate, maxRate       = 1e3, 1e18 // FLOP/s and bytes/s
	minMemory, maxMemory   = 1 << 20, 1 << 50
	minLatency, maxLatency = 0, 10 // seconds
)

// Validate checks every count, rate, capacity and latency: counts from 1,
// the device count at most MaxDevices, and every number finite and within
// its range. Errors wrap checked.ErrRange and name the field.
func (m Machine) Validate() error {
	if err := checked.Count("nodes", int64(m.Nodes), 1, MaxDevices); err != nil {
		return err
	}
	if err := checked.Count("devices_per_node", int64(m.DevicesPerNode), 1, MaxDevices); err != nil {
		return err
	}
	if n, err := checked.Mul(int64(m.Nodes), int64(m.DevicesPerNode)); err != nil || n > MaxDevices {
		return fmt.Errorf("nodes × devices_per_node is %d × %d; want at most %d devices: %w", m.Nodes, m.DevicesPerNode, MaxDevices, checked.ErrRange)
	}
	reals := []struct {
		field  string
		value  float64
		lo, hi float64
	}{
		{"device.peak_flops", m.Device.PeakFLOPS, minRate, maxRate},
		{"device.memory_bandwidth", m.Device.MemoryBandwidth, minRate, maxRate},
		{"device.peak_flops_bf16", m.Device.PeakBF16, 0, maxRate},
		{"device.peak_flops_fp16", m.Device.PeakFP16, 0, maxRate},
		{"device.peak_flops_tf32", m.Device.PeakTF32, 0, maxRate},
		{"device.memory_bytes", m.Device.MemoryBytes, minMemory, maxMemory},
		{"intra_node.bandwidth", m.IntraNode.Bandwidth, minRate, maxRate},
		{"intra_node.latency", m.IntraNode.Latency, minLatency, maxLatency},
		{"inter_node.bandwidth", m.InterNode.Bandwidth, minRate, maxRate},
		{"inter_node.latency", m.InterNode.Latency, minLatency, maxLatency},
	}
	for _, r := range reals {
		if err := checked.Real(r.field, r.value, r.lo, r.hi); err != nil {
			return err
		}
		// a precision's peak is absent (0) or a rate like any other
		if strings.HasPrefix(r.field, "device.peak_flops_") && r.value != 0 && r.value < minRate {
			return fmt.Errorf("%s is %g; want 0 (none) or at least %g: %w", r.field, r.value, float64(minRate), checked.ErrRange)
		}
	}
	return nil
}

// Presets are the built-in machines, one node each; Parse multiplies.
// Device figures are vendors' published peak numbers: fp32 without tensor
// cores, and the dense (not 2:4 sparse) tensor-core peaks per precision
// from each GPU's datasheet. Link bandwidths are what NCCL achieves, a
// public nccl-tests bus bandwidth, where one is published; the line rate
// otherwise (docs/planner.md, "Machine model").
var presets = map[string]Machine{
	// Unity's testbed (Unity §6): Summit nodes, 6 V100 16 GB (15.7 TFLOP/s
	// fp32, 125 TFLOP/s fp16 tensor cores, no bf16 or tf32: NVIDIA Tesla
	// V100 datasheet; 900 GB/s HBM2), NVLink 2.0 within a node (50 GB/s
	// per direction between GPU pairs), dual-rail EDR InfiniBand between
	// nodes (2 × 100 Gb/s = 25 GB/s per node). No nccl-tests figure for
	// Summit is public: these are line rates.
	"summit": {Name: "summit", Nodes: 1, DevicesPerNode: 6,
		Device:    Device{Name: "V100-SXM2-16GB", PeakFLOPS: 15.7e12, PeakFP16: 125e12, MemoryBandwidth: 900e9, MemoryBytes: 16 << 30},
		IntraNode: Link{Bandwidth: 50e9, Latency: 5e-6}, InterNode: Link{Bandwidth: 25e9, Latency: 10e-6}},
	// DGX A100: 8 A100 80 GB (19.5 TFLOP/s fp32; 312 bf16 and fp16, 156
	// tf32 dense tensor-core: NVIDIA A100 datasheet; 2.0 TB/s) on NVSwitch
	// (300 GB/s per direction per GPU, line rate), and 8 single-port
	// ConnectX-6 HDR InfiniBand NICs for compute, one per GPU (8 × 200
	// Gb/s = 200 GB/s, line rate). Measured: all_reduce_perf on one
	// 8-A100 NVSwitch node reaches a bus bandwidth of 232.5 GB/s
	// (NVIDIA/nccl#1048); on two DGX A100, NVIDIA measures 192 GB/s
	// (NVIDIA/nccl#812, comment of 2023-03-31).
	"dgx-a100": {Name: "dgx-a100", Nodes: 1, DevicesPerNode: 8,
		Device: Device{Name: "A100-SXM4-80GB", PeakFLOPS: 19.5e12, PeakBF16: 312e12, PeakFP16: 312e12, PeakTF32: 156e12,
			MemoryBandwidth: 2.0e12, MemoryBytes: 80 << 30},
		IntraNode: Link{Bandwidth: 232e9, Latency: 3e-6}, InterNode: Link{Bandwidth: 192e9, Latency: 5e-6}},
	// DGX H100: 8 H100 SXM 80 GB (67 TFLOP/s fp32; 989 bf16 and fp16, 494
	// tf32 dense tensor-core: NVIDIA H100 datasheet, SXM; 3.35 TB/s) on
	// NVSwitch (450 GB/s per direction per GPU, line rate) and 8
	// ConnectX-7 NDR NICs (8 × 400 Gb/s = 400 GB/s, line rate). Measured:
	// a ring all-reduce over NVLink reaches 370 GB/s
	// (NVIDIA/nccl-tests#212, NVIDIA/nccl#1455); an NDR NIC 46–48 GB/s
	// under nccl-tests (NVIDIA/nccl-tests#290), so 8 × 47 = 376 GB/s per
	// node.
	"h100": {Name: "h100", Nodes: 1, DevicesPerNode: 8,
		Device: Device{Name: "H100-SXM5-80GB", PeakFLOPS: 67e12, PeakBF16: 989e12, PeakFP16: 989e12, PeakTF32: 494e12,
			MemoryBandwidth: 3.35e12, MemoryBytes: 80 << 30},
		IntraNode: Link{Bandwidth: 370e9, Latency: 3e-6}, InterNode: Link{Bandwidth: 376e9, Latency: 5e-6}},
	// HGX H200: 8 H200 SXM 141 GB (the H100's compute: 67 TFLOP/s fp32;
	// 989 bf16 and fp16, 494 tf32 dense: NVIDIA H200 datasheet; 4.8 TB/s
	// HBM3e) on NVLink/NVSwitch (450 GB/s per direction per GPU, line
	// rate) and 8 × 400 Gb/s NDR NICs: the DGX H100's NVLink and NICs,
	// priced at the same measured bus bandwidths (370 and 376 GB/s). Its
	// operators are priced from the shipped profile measured on one
	// (profile.Builtin).
	"h200": {Name: "h200", Nodes: 1, DevicesPerNode: 8,
		Device: Device{Name: "H200-SXM-141GB", PeakFLOPS: 67e12, PeakBF16: 989e12, PeakFP16: 989e12, PeakTF32: 494e12,
			MemoryBandwidth: 4.8e12, MemoryBytes: 141e9},
		IntraNode: Link{Bandwidth: 370e9, Latency: 3e-6}, InterNode: Link{Bandwidth: 376e9, Latency: 5e-6}},
	// One core pair of the development machine, roughly: 2 cores × 32
	// fp32 FLOP/cycle × 2.5 GHz, about 10 GB/s of memory bandwidth. It
	// has AVX-512 BF16, whose dot products run at twice the fp32 rate, and
	// PyTorch trains in bf16 on a CPU too (a profile measured here with
	// `rulebook profile` holds bf16).
	"cpu": {Name: "cpu", Nodes: 1, DevicesPerNode: 1,
		Device:    Device{Name: "2-core CPU", PeakFLOPS: 160e9, PeakBF16: 320e9, MemoryBandwidth: 10e9, MemoryBytes: 16 << 30},
		IntraNode: Link{Bandwidth: 10e9, Latency: 1e-6}, InterNode: Link{Bandwidth: 1.25e9, Latency: 50e-6}},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset is a preset machine with the given number of nodes.
func Preset(name string, nodes int) (Machine, error) {
	m, ok := presets[name]
	if !ok {
		return Machine{}, fmt.Errorf("unknown machine preset %q (known: %s; or a machine .json file)", name, strings.Join(PresetNames(), ", "))
	}
	if nodes < 1 {
		return Machine{}, fmt.Errorf("machine %s:%d: want at least 1 node", name, nodes)
	}
	m.Nodes = nodes
	m.Name = fmt.Sprintf("%s:%d", name, nodes)
	if err := m.Validate(); err != nil {
		return Machine{}, fmt.Errorf("machine %s: %w", m.Name, err)
	}
	return m, nil
}

// Parse reads --machine: "PRESET", "PRESET:NODES", "PRESET:NODESxDEVICES"
// for part of each node (h100:1x2 is two of a node's eight GPUs), or a
// path to a machine JSON file (one that ends in .json or contains a
// slash).
func Parse(spec string) (Machine, error) {
	if IsFile(spec) {
		return Load(spec)
	}
	name, count, found := strings.Cut(spec, ":")
	if !found {
		return Preset(name, 1)
	}
	nodeCount, deviceCount, partial := strings.Cut(count, "x")
	nodes, err := strconv.Atoi(nodeCount)
	if err != nil {
		if nodeCount == "" {
			nodeCount = count
		}
		return Machine{}, fmt.Errorf("machine %q: node count %q is not a number", spec, nodeCount)
	}
	m, err := Preset(name, nodes)
	if err != nil || !partial {
		return m, err
	}
	devices, err := strconv.Atoi(deviceCount)
	if err != nil {
		return Machine{}, fmt.Errorf("machine %q: device count %q is not a number", spec, deviceCount)
	}
	return m.PartOfNodes(devices)
}

// PartOfNodes is the machine with only devices of each node's devices in
// use: a workstation, or the GPUs a job was given. The links stay the
// node's.
func (m Machine) PartOfNodes(devices int) (Machine, error) {
	if devices < 1 || devices > m.DevicesPerNode {
		return Machine{}, fmt.Errorf("machine %s: a node has %d devices (%s); want 1 to %d in NODESxDEVICES, got %d",
			m.Name, m.DevicesPerNode, m.Device.Name, m.DevicesPerNode, devices)
	}
	m.Name = fmt.Sprintf("%sx%d", m.Name, devices)
	m.DevicesPerNode = devices
	return m, nil
}

// IsFile tells a machine file from a preset: it ends in .json or has a
// folder in its path.
func IsFile(spec string) bool {
	return strings.HasSuffix(spec, ".json") || strings.ContainsRune(spec, os.PathSeparator)
}

// Load reads and validates a machine file; unknown fields are errors.
func Load(path string) (Machine, error) {
	data, err := infile.ReadFile(path, infile.Machine)
	if err != nil {
		return Machine{}, fmt.Errorf("machine: %w", err)
	}
	m, err := Decode(data)
	if err != nil {
		return Machine{}, fmt.Errorf("%s: %w", path, err)
	}
	if m.Name == "" {
		m.Name = path
	}
	return m, nil
}

// Decode parses and validates a machine's JSON.
func Decode(data []byte) (Machine, error) {
	var m Machine
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return Machine{}, fmt.Errorf("not a machine description: %w", err)
	}
	if d.More() {
		return Machine{}, fmt.Errorf("not a machine description: data after the JSON object")
	}
	return m, m.Validate()
}

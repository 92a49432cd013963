package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"rulebook/training"
)

// TorchPlan is a plan as PyTorch's DTensor applies it (docs/torch-plan.md):
// a device mesh of data- and tensor-parallel dimensions, and for each
// module path that tensor parallelism cuts, parallelize_module's style
// (ColwiseParallel or RowwiseParallel). scripts/torch_plan_run.py runs it.
type TorchPlan struct {
	Format    string `json:"format"`
	Model     string `json:"model"`
	WorldSize int    `json:"world_size"`
	// Layers is the length of the model's layers ModuleList (module
	// paths layers.0, layers.1, …), so that a runner builds the model at
	// the depth the plan names; 0 when the model has none.
	Layers  int               `json:"layers,omitempty"`
	Mesh    TorchMesh         `json:"mesh"`
	Modules map[string]string `json:"modules"`
	Note    string            `json:"note"`
}

// TorchMesh is DTensor's DeviceMesh: its shape and dimension names.
type TorchMesh struct {
	Shape    []int    `json:"shape"`
	DimNames []string `json:"dim_names"`
}

// HeadsStyle is the torch plan's style for an nn.MultiheadAttention whose
// packed in_proj the plan cuts by heads and whose out_proj by rows: DTensor
// has no style for it (the module calls its weights, not Linear
// modules), so the bridge applies it itself (docs/torch-plan.md).
const HeadsStyle = "heads"

// TorchFormat names the torch plan's schema.
const TorchFormat = "rulebook.torch-plan/1"

// ErrNotTorch marks a plan that DTensor's parallelize_module cannot
// express (pipeline stages, a cut convolution, an operator without a
// module path).
var ErrNotTorch = errors.New("not expressible as a DTensor plan")

// Torch turns the chosen plan into a DTensor plan. Module paths come from
// the ONNX node names PyTorch's exporter writes ("/layers.0/q/MatMul" is
// module layers.0.q). Pipeline plans are refused: DTensor's
// parallelize_module has no stages.
func (c *Choice) Torch(g *training.Graph) (*TorchPlan, error) {
	s := c.Chosen.Strategy
	if s.PP > 1 {
		return nil, fmt.Errorf("--emit torch: the chosen plan (%s) has pipeline stages, which parallelize_module cannot express; choose --strategy dp, tp or grid: %w", s, ErrNotTorch)
	}
	if s.Embedding != "" {
		return nil, fmt.Errorf("--emit torch: the chosen plan (%s) shards embedding tables over the devices (by table, row or column), which parallelize_module cannot express (TorchRec's sharder does); choose --strategy dp, tp or grid: %w", s, ErrNotTorch)
	}
	t := &TorchPlan{Format: TorchFormat, Model: c.Model, WorldSize: s.Devices(), Layers: layerCount(g),
		Mesh:    TorchMesh{Shape: []int{s.DP, s.TP}, DimNames: []string{"dp", "tp"}},
		Modules: map[string]string{}, Note: "layouts only; the times in the plan this came from are " + Simulated}
	if ls := s.leverNames(); len(ls) > 0 {
		// DTensor's plan has no place for them: the user applies them
		t.Note += "; it fits only with memory levers this plan does not apply: " + strings.Join(ls, "; ")
	}
	reduced := map[string]bool{} // heads modules whose out_proj is cut by rows
	for i, op := range g.Ops {
		st := c.Chosen.Layouts[i].Style
		if c.Chosen.Layouts[i].GatherInputs {
			// a module given a local shard would compute on it as if whole
			return nil, fmt.Errorf("--emit torch: %s (%s) gathers slices that tensor parallelism cut (a reshape that splits a head, or a normalization of cut features), which parallelize_module's styles do not express; choose --strategy dp or a degree that divides the heads: %w", op.Name, op.Type, ErrNotTorch)
		}
		if err := cutOutput(g, op, c.Chosen.Layouts[i]); err != nil {
			return nil, err
		}
		if st != Colwise && st != Rowwise {
			continue
		}
		if !op.Product.Linear {
			return nil, fmt.Errorf("--emit torch: %s (%s) is cut %s, but DTensor's %s applies to Linear modules only; choose --strategy dp: %w", op.Name, op.Type, st, map[Style]string{Colwise: "ColwiseParallel", Rowwise: "RowwiseParallel"}[st], ErrNotTorch)
		}
		if op.Module == "" {
			return nil, fmt.Errorf("--emit torch: operator %s is cut %s but its name carries no module path: %w", op.Name, st, ErrNotTorch)
		}
		style := st.String()
		if c.Chosen.Layouts[i].Groups > 1 {
			// a packed in_proj cut by heads: the attention module's style
			style = HeadsStyle
		}
		prev, ok := t.Modules[op.Module]
		if ok && prev == HeadsStyle && st == Rowwise {
			// the out_proj of a heads module, which the style cuts by rows
			reduced[op.Module] = true
			continue
		}
		if ok && prev != style {
			return nil, fmt.Errorf("--emit torch: module %s is cut both %s and %s: %w", op.Module, prev, style, ErrNotTorch)
		}
		t.Modules[op.Module] = style
	}
	for m, st := range t.Modules {
		if st == HeadsStyle && !reduced[m] {
			return nil, fmt.Errorf("--emit torch: module %s's packed in_proj is cut by heads, but its out_proj does not reduce them by a row cut: %w", m, ErrNotTorch)
		}
	}
	return t, nil
}

// cutOutput refuses an operator whose cut output no operator reads: the
// model's output, which a ColwiseParallel module would return as a local
// shard (an MLP of odd depth ends on a column cut).
func cutOutput(g *training.Graph, op training.Op, l OpLayout) error {
	if !l.sliced() {
		return nil
	}
	for _, v := range op.Outputs {
		if len(g.Consumers(v)) == 0 {
			return fmt.Errorf("--emit torch: the model's output %s stays cut by tensor parallelism (%s is %s), and parallelize_module would return each device's shard; choose --strategy dp: %w", v, op.Name, l.Style, ErrNotTorch)
		}
	}
	return nil
}

// layerCount is one more than the largest N of a module path layers.N…,
// or 0 when no operator lies in such a module.
func layerCount(g *training.Graph) int {
	n := 0
	for _, op := range g.Ops {
		rest, ok := strings.CutPrefix(op.Module, "layers.")
		if !ok {
			continue
		}
		index, _, _ := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(index); err == nil && i >= 0 && i < math.MaxInt {
			n = max(n, i+1)
		}
	}
	return n
}

// Write writes the torch plan as JSON (encoding/json sorts the modules).
func (t *TorchPlan) Write(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(t)
}

package plan

import (
	"encoding/json"
	"fmt"
	"io"

	"rulebook/training"
)

// TorchPlan is a plan as PyTorch's DTensor applies it (docs/torch-plan.md):
// a device mesh of data- and tensor-parallel dimensions, and for each
// module path that tensor parallelism cuts, parallelize_module's style
// (ColwiseParallel or RowwiseParallel). scripts/torch_plan_run.py runs it.
type TorchPlan struct {
	Format    string            `json:"format"`
	Model     string            `json:"model"`
	WorldSize int               `json:"world_size"`
	Mesh      TorchMesh         `json:"mesh"`
	Modules   map[string]string `json:"modules"`
	Note      string            `json:"note"`
}

// TorchMesh is DTensor's DeviceMesh: its shape and dimension names.
type TorchMesh struct {
	Shape    []int    `json:"shape"`
	DimNames []string `json:"dim_names"`
}

// TorchFormat names the torch plan's schema.
const TorchFormat = "rulebook.torch-plan/1"

// Torch turns the chosen plan into a DTensor plan. Module paths come from
// the ONNX node names PyTorch's exporter writes ("/layers.0/q/MatMul" is
// module layers.0.q). Pipeline plans are refused: DTensor's
// parallelize_module has no stages.
func (c *Comparison) Torch(g *training.Graph) (*TorchPlan, error) {
	s := c.Chosen.Strategy
	if s.PP > 1 {
		return nil, fmt.Errorf("--emit torch: the chosen plan (%s) has pipeline stages, which parallelize_module cannot express; choose --strategy dp, tp or grid", s)
	}
	t := &TorchPlan{Format: TorchFormat, Model: c.Model, WorldSize: s.Devices(),
		Mesh:    TorchMesh{Shape: []int{s.DP, s.TP}, DimNames: []string{"dp", "tp"}},
		Modules: map[string]string{}, Note: "layouts only; the times in the plan this came from are " + Simulated}
	for i, op := range g.Ops {
		st := c.Chosen.Layouts[i].Style
		if st != Colwise && st != Rowwise {
			continue
		}
		if !op.Product.Linear {
			return nil, fmt.Errorf("--emit torch: %s (%s) is cut %s, but DTensor's %s applies to Linear modules only; choose --strategy dp", op.Name, op.Type, st, map[Style]string{Colwise: "ColwiseParallel", Rowwise: "RowwiseParallel"}[st])
		}
		if op.Module == "" {
			return nil, fmt.Errorf("--emit torch: operator %s is cut %s but its name carries no module path", op.Name, st)
		}
		if prev, ok := t.Modules[op.Module]; ok && prev != st.String() {
			return nil, fmt.Errorf("--emit torch: module %s is cut both %s and %s", op.Module, prev, st)
		}
		t.Modules[op.Module] = st.String()
	}
	return t, nil
}

// Write writes the torch plan as JSON (encoding/json sorts the modules).
func (t *TorchPlan) Write(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(t)
}

package runtime

import (
	"fmt"

	"rulebook/internal/budget"
)

// reserve takes from the meter the bytes of a tensor of the given shape
// that the runtime is about to build: float32 data, and for an integer
// constant its exact int64 elements too; transient adds the float64 copy
// a fold over constants makes. what names the input, initializer or
// output; the caller's context adds the node and the file.
func reserve(m *budget.Meter, what string, shape []int, integer, transient bool) error {
	per, kind := 4, "float32"
	if integer {
		per, kind = 4+8, "int64"
	}
	if transient {
		per += 8
	}
	desc := fmt.Sprintf("%s of shape %s (%s)", what, formatShape(shape), kind)
	n, ok := budget.Product(append([]int{per}, shape...)...)
	if !ok {
		return &budget.ExceededError{What: desc, Overflow: true, Limit: m.Budget().Bytes()}
	}
	return m.Take(desc, n)
}

// reserveSession checks that a session's buffers, workspace and outputs
// fit in what the model's constants and inputs leave of its budget,
// before any of them is allocated.
func (m *Model) reserveSession(plan bufferPlan, scratch int) error {
	meter := budget.NewMeter(m.memory)
	if err := meter.Take("the model's constants and inputs", m.held); err != nil {
		return err
	}
	if err := reserve(meter, fmt.Sprintf("the buffers of %d intermediate values", len(plan.sizes)), []int{plan.total()}, false, false); err != nil {
		return err
	}
	if err := reserve(meter, "a node's workspace", []int{scratch}, false, false); err != nil {
		return err
	}
	for _, id := range m.outputs {
		if v := m.values[id]; !v.isConst() {
			if err := reserve(meter, fmt.Sprintf("output %q", v.name), v.shape, false, false); err != nil {
				return err
			}
		}
	}
	return nil
}

package enumerate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"rulebook/rules"
)

// bruteCount counts distinct graphs per size the naive way: every sequence
// of operator applications, each DAG identified by the sorted set of its
// nodes' structural terms (without duplicated computation a DAG is exactly
// that set), keeping graphs whose inputs form a prefix of each class.
func bruteCount(t *testing.T, reg *rules.Registry, pool rules.Pool, maxOps int) []int {
	t.Helper()
	tmpls := templates(reg, pool, 0)
	type value struct {
		term  string
		shape rules.Shape
		role  rules.Role
		input int // −1 for node outputs
		op    *rules.Op
	}
	var inputs []value
	for _, c := range pool.Classes {
		for k := 0; k < c.Copies; k++ {
			inputs = append(inputs, value{term: fmt.Sprintf("%s%d", c.Name, k), shape: c.Shape, role: c.Role, input: len(inputs)})
		}
	}
	seen := make([]map[string]bool, maxOps+1)
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	isPrefix := func(used []bool) bool {
		i := 0
		for _, c := range pool.Classes {
			gap := false
			for k := 0; k < c.Copies; k++ {
				if used[i+k] && gap {
					return false
				}
				gap = gap || !used[i+k]
			}
			i += c.Copies
		}
		return true
	}
	var rec func(values []value, nodes []string, consts []string, used []bool)
	rec = func(values []value, nodes []string, consts []string, used []bool) {
		if len(nodes) > 0 && isPrefix(used) {
			key := slices.Clone(nodes)
			slices.Sort(key)
			seen[len(nodes)][strings.Join(key, "|")] = true
		}
		if len(nodes) == maxOps {
			return
		}
		for _, tm := range tmpls {
			var argLists [][]int
			switch tm.op.Arity {
			case 0:
				argLists = [][]int{nil}
			case 1:
				for a := range values {
					argLists = append(argLists, []int{a})
				}
			case 2:
				for a := range values {
					for b := range values {
						if a != b {
							argLists = append(argLists, []int{a, b})
						}
					}
				}
			}
			for _, args := range argLists {
				if tm.constKey != "" && slices.Contains(consts, tm.constKey) {
					continue
				}
				var shapes []rules.Shape
				role := rules.RoleNeutral
				ok := true
				for i, a := range args {
					v := values[a]
					if !tm.op.Takes(i, v.role) ||
						v.input < 0 && (tm.op.InputOperand(i) || !v.op.CanFeed(tm.op)) {
						ok = false
					}
					shapes = append(shapes, v.shape)
					role = role.Join(v.role)
				}
				if tm.op.IsConstant() {
					shapes, role = []rules.Shape{tm.constShape}, rules.RoleWeight
				}
				out, err := tm.op.InferShapes(tm.params, shapes)
				if !ok || err != nil {
					continue
				}
				term := tm.String() + "("
				for _, a := range args {
					term += values[a].term + ","
				}
				term += ")"
				if slices.Contains(nodes, term) {
					continue // duplicated computation
				}
				next := slices.Clone(values)
				for o, s := range out {
					next = append(next, value{term: fmt.Sprintf("%s.%d", term, o), shape: s, role: role, input: -1, op: tm.op})
				}
				nextUsed := slices.Clone(used)
				for _, a := range args {
					if values[a].input >= 0 {
						nextUsed[values[a].input] = true
					}
				}
				rec(next, append(slices.Clone(nodes), term), append(slices.Clone(consts), tm.constKey), nextUsed)
			}
		}
	}
	rec(inputs, nil, nil, make([]bool, len(inputs)))
	counts := make([]int, maxOps)
	for n := 1; n <= maxOps; n++ {
		counts[n-1] = len(seen[n])
	}
	return counts
}

func TestExhaustiveMatchesBruteForce(t *testing.T) {
	cases := []struct {
		name string
		ops  []string
		pool rules.Pool
		max  int
	}{
		{"ewadd relu transpose", []string{"ewadd", "relu", "transpose"},
			rules.Pool{Classes: []rules.InputClass{{Name: "x", Shape: rules.NewShape(2, 4), Copies: 3, Role: rules.RoleData}, {Name: "w", Shape: rules.NewShape(4, 4), Copies: 2, Role: rules.RoleWeight}}}, 3},
		{"matmul transpose smul", []string{"matmul", "transpose", "smul"},
			rules.Pool{Classes: []rules.InputClass{{Name: "x", Shape: rules.NewShape(2, 4), Copies: 2, Role: rules.RoleData}, {Name: "w", Shape: rules.NewShape(4, 4), Copies: 2, Role: rules.RoleWeight}, {Name: "s", Shape: rules.NewShape(), Copies: 1, Role: rules.RoleNeutral}}}, 3},
		// Two scalars meet in smul's input operand; they feed no other operator.
		{"smul ewadd transpose with two scalars", []string{"smul", "ewadd", "transpose"},
			rules.Pool{Classes: []rules.InputClass{{Name: "x", Shape: rules.NewShape(2, 4), Copies: 2, Role: rules.RoleData}, {Name: "s", Shape: rules.NewShape(), Copies: 2, Role: rules.RoleNeutral}}}, 3},
		{"concat split ewmul I_matmul", []string{"concat", "split", "ewmul", "I_matmul"},
			rules.Pool{Classes: []rules.InputClass{{Name: "x", Shape: rules.NewShape(2, 4), Copies: 2, Role: rules.RoleData}, {Name: "w", Shape: rules.NewShape(4, 4), Copies: 2, Role: rules.RoleWeight}},
				Constants: map[string][]rules.Shape{"I_matmul": {rules.NewShape(4, 4)}}}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg, err := rules.Default().Select(c.ops)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Generate(context.Background(), Config{Registry: reg, Pool: c.pool, MaxOps: c.max, Seed: 1, Exhaustive: true})
			if err != nil {
				t.Fatal(err)
			}
			want := bruteCount(t, reg, c.pool, c.max)
			t.Logf("graphs per size: brute force %v", want)
			for n := 1; n <= c.max; n++ {
				if got := res.Stats.Levels[n-1].Graphs; got != int64(want[n-1]) {
					t.Errorf("%d operators: enumerated %d graphs, brute force counts %d", n, got, want[n-1])
				}
			}
		})
	}
}

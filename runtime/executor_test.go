package runtime

import (
	"strings"
	"testing"
	"time"
)

func TestCheckBackend(t *testing.T) {
	if err := CheckBackend(BackendCPU); err != nil {
		t.Errorf("cpu: %v", err)
	}
	if err := CheckBackend("tpu"); err == nil || !strings.Contains(err.Error(), `backend must be cpu or cuda, got "tpu"`) {
		t.Errorf("tpu: %v", err)
	}
}

// Configurations are told apart by operator, shapes and parameters; the
// totals add each node's cost by operator, the largest first.
func TestConfigsAndTotals(t *testing.T) {
	nodes := []NodeInfo{
		{Index: 0, Op: "Conv", Inputs: [][]int{{1, 3, 8, 8}}, Outputs: [][]int{{1, 4, 8, 8}}, Params: "group=1"},
		{Index: 1, Op: "Relu", Inputs: [][]int{{1, 4, 8, 8}}, Outputs: [][]int{{1, 4, 8, 8}}},
		{Index: 2, Op: "Conv", Inputs: [][]int{{1, 3, 8, 8}}, Outputs: [][]int{{1, 4, 8, 8}}, Params: "group=1"},
		{Index: 3, Op: "Conv", Inputs: [][]int{{1, 3, 8, 8}}, Outputs: [][]int{{1, 4, 8, 8}}, Params: "group=3"},
	}
	distinct := DistinctConfigs(nodes)
	if len(distinct) != 3 || distinct[0].Index != 0 || distinct[1].Index != 1 || distinct[2].Index != 3 {
		t.Errorf("distinct configurations %+v", distinct)
	}
	cost := map[string]time.Duration{"Conv": 2 * time.Millisecond, "Relu": 5 * time.Millisecond}
	totals, all := TotalsByOperator(nodes, func(n NodeInfo) time.Duration { return cost[n.Op] })
	want := []OperatorTotal{{Op: "Conv", Nodes: 3, Sum: 6 * time.Millisecond}, {Op: "Relu", Nodes: 1, Sum: 5 * time.Millisecond}}
	if all != 11*time.Millisecond || len(totals) != 2 || totals[0] != want[0] || totals[1] != want[1] {
		t.Errorf("totals %+v, all %v", totals, all)
	}
}

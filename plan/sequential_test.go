package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/training"
	"rulebook/version"
)

// TestJointAgainstSequential: on the MLP, whose products each feed a
// relu, optimising jointly is never slower than fusing every relu first
// and searching the layouts after (TASO, then FlexFlow), in the same
// simulator; the joint plan leaves unfused the relus after row cuts,
// whose partial sums relu cannot take, and the sequential plan cuts no
// product before a relu by rows. Unity's Figure 15b.
func TestJointAgainstSequential(t *testing.T) {
	subs := parallelVersion(t)
	if subs.Fuse == nil {
		t.Fatal("the version has no fusion rule")
	}
	m, _ := training.Builtin("mlp")
	g, err := training.FromONNX(m, "mlp", 384)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for _, s := range []Strategy{{Kind: Joint, DP: 1, TP: 2, PP: 4, Microbatches: 8}, {Kind: Joint, DP: 2, TP: 4, PP: 1, Microbatches: 1}, {Kind: Joint, DP: 1, TP: 8, PP: 1, Microbatches: 1}} {
		o := Options{Machine: machine(8), Precision: cluster.FP16, Substitutions: subs}
		joint, err := Price(context.Background(), g, s, o)
		if err != nil || joint.Err != nil {
			t.Fatalf("%s joint: %v %v", layoutText(s), err, joint.Err)
		}
		o.Sequential = true
		seq, err := Price(context.Background(), g, s, o)
		if err != nil || seq.Err != nil {
			t.Fatalf("%s sequential: %v %v", layoutText(s), err, seq.Err)
		}
		if joint.Time.Step > seq.Time.Step {
			t.Errorf("%s: joint %.2f ms, sequential %.2f ms", layoutText(s), joint.Time.Step*1e3, seq.Time.Step*1e3)
		}
		fused, rows := 0, 0
		for i, l := range seq.Layouts {
			if _, ok := o.fusable(g, i); ok && l.Style == Rowwise {
				rows++
			}
			if l.Fused {
				fused++
			}
			if l.Fused && seq.Layouts[i-1].Style == Rowwise {
				t.Errorf("%s: sequential fuses %s after a row cut", layoutText(s), g.Ops[i].Name)
			}
		}
		if rows != 0 || fused == 0 {
			t.Errorf("%s: the sequential plan has %d row cuts before a relu and %d fused relus", layoutText(s), rows, fused)
		}
		fmt.Fprintf(&table, "%s: joint %.2f ms, sequential %.2f ms (%.2f×)\n", layoutText(s), joint.Time.Step*1e3, seq.Time.Step*1e3, seq.Time.Step/joint.Time.Step)
	}
	t.Log("\n" + table.String())
}

// BenchmarkJointAgainstSequential is Unity's Figure 15b in our simulator:
// the joint family's simulated step on summit's 1 to 8 nodes, searched
// jointly with the relu fusions and after fusing them all first. It
// reports both steps and their ratio; the timing is the two searches'.
//
//	go test ./plan -run '^$' -bench JointAgainstSequential -benchtime 1x
func BenchmarkJointAgainstSequential(b *testing.B) {
	v, err := loadBundle("testdata/parallel-v1.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		model string
		batch int64 // per device
	}{{"mlp", 64}, {"dlrm", 64}, {"bert-large", 4}} {
		m, _ := training.Builtin(c.model)
		for _, nodes := range []int{1, 2, 4, 8} {
			machine, _ := cluster.Preset("summit", nodes)
			g, err := training.FromONNX(m, c.model, c.batch*int64(machine.NumDevices()))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/summit:%d", c.model, nodes), func(b *testing.B) {
				var joint, seq float64
				for range b.N {
					joint, seq = jointStep(b, g, machine, v, false), jointStep(b, g, machine, v, true)
				}
				b.ReportMetric(joint*1e3, "joint-ms")
				b.ReportMetric(seq*1e3, "sequential-ms")
				b.ReportMetric(seq/joint, "sequential/joint")
			})
		}
	}
}

func jointStep(b *testing.B, g *training.Graph, m cluster.Machine, subs *Substitutions, sequential bool) float64 {
	c, err := Choose(context.Background(), g, []Kind{Joint}, Options{Machine: m, BucketBytes: DefaultBucketBytes, Substitutions: subs, Sequential: sequential})
	if err != nil {
		b.Fatal(err)
	}
	return c.Chosen.Time.Step
}

func loadBundle(path string) (*Substitutions, error) {
	v, err := version.LoadBundle(path)
	if err != nil {
		return nil, err
	}
	return NewSubstitutions(v)
}

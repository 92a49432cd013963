package plan

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/training"
)

// TestFrontier: BERT-Large at batch 96 on summit:1 in fp32, where plain
// data parallelism does not fit, has a frontier of several plans. No point
// beats another in both step and memory; each point's figures are what
// Price gives its strategy on its own; the fastest point that fits is as
// fast as the plan Choose picks; and under a memory limit below the
// chosen plan's memory the frontier still offers plans that fit.
func TestFrontier(t *testing.T) {
	m, _ := training.Builtin("bert-large")
	g, err := training.FromONNX(m, "bert-large", 96)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Machine: machine(6), Precision: cluster.FP32}
	ps, err := Frontier(context.Background(), g, Kinds, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < 3 {
		t.Fatalf("the frontier has %d plans, want at least 3: %+v", len(ps), ps)
	}
	for i, p := range ps {
		for j, q := range ps {
			if i != j && q.Step <= p.Step && q.Memory <= p.Memory {
				t.Errorf("%s (%.2f ms, %.2f GiB) is beaten by %s (%.2f ms, %.2f GiB)", p.Layout, p.Step*1e3, p.Memory/(1<<30), q.Layout, q.Step*1e3, q.Memory/(1<<30))
			}
		}
		r, err := Price(context.Background(), g, p.Strategy, o)
		if err != nil || r.Err != nil {
			t.Fatalf("%s: %v %v", p.Layout, err, r.Err)
		}
		if r.Time.Step != p.Step || r.Memory.Total() != p.Memory || r.Fits != p.Fits {
			t.Errorf("%s: frontier says %.4f ms, %.4f GiB; priced alone %.4f ms, %.4f GiB", p.Layout, p.Step*1e3, p.Memory/(1<<30), r.Time.Step*1e3, r.Memory.Total()/(1<<30))
		}
	}
	c, err := Choose(context.Background(), g, Kinds, o)
	if err != nil {
		t.Fatal(err)
	}
	fastest := ps[len(ps)-1]
	if !c.Fits || fastest.Step > c.Chosen.Time.Step {
		t.Errorf("the frontier's fastest plan %s takes %.2f ms; Choose picked %s at %.2f ms", fastest.Layout, fastest.Step*1e3, c.Chosen.Strategy, c.Chosen.Time.Step*1e3)
	}
	o.MemoryLimit = c.Chosen.Memory.Total() / 2
	tight, err := Frontier(context.Background(), g, []Kind{DataParallel}, o)
	if err != nil {
		t.Fatal(err)
	}
	fit := 0
	for _, p := range tight {
		if p.Fits {
			fit++
		}
	}
	if fit == 0 {
		t.Errorf("no frontier plan fits in %.2f GiB", o.MemoryLimit/(1<<30))
	}
}

// TestFrontierFiles: plan --pareto -o writes the frontier as CSV, one row
// per plan printed, and as SVG that parses as XML with a dot per plan.
func TestFrontierFiles(t *testing.T) {
	dir := t.TempDir()
	out, err := Run(context.Background(), Request{Model: "mlp", Machine: "summit:1", Batch: 1536, Pareto: true, Out: filepath.Join(dir, "mlp.json")})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := out.WriteText(&text, false, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "time/memory frontier") || !strings.Contains(text.String(), Simulated) {
		t.Errorf("the printed frontier does not say what it is:\n%s", text.String())
	}
	f, err := os.Open(filepath.Join(dir, "mlp.pareto.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != len(out.Frontier)+1 || len(out.Frontier) == 0 {
		t.Fatalf("CSV: %d rows for %d plans: %v", len(rows), len(out.Frontier), err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "mlp.pareto.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dots := 0
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v", err)
		}
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "circle" {
			dots++
		}
	}
	if dots != len(out.Frontier) {
		t.Errorf("the SVG has %d dots for %d plans", dots, len(out.Frontier))
	}
}

// TestEmptyFrontierPlot: with no plan in the device's memory the plot
// says so, whole and well-formed, rather than failing after the plan's
// other files are written.
func TestEmptyFrontierPlot(t *testing.T) {
	var b bytes.Buffer
	if err := WriteFrontierSVG(&b, nil, 16<<30, "m on x: time/memory frontier (simulated)"); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&b)
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the empty plot does not parse: %v", err)
		}
	}
}

package profile

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rulebook/cluster"
)

// needTorch skips unless python3 imports torch, as the bridge's tests do.
func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command("python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("python3 cannot import torch (pip install -r scripts/requirements-bridge.txt): %v", err)
	}
}

// TestMeasureOnThisCPU measures the small profile with PyTorch on the CPU:
// every operator kind in fp32 and bf16, the computed columns right, and
// the profile round-trips through Write and Parse.
func TestMeasureOnThisCPU(t *testing.T) {
	needTorch(t)
	var seen, total int
	m, err := Measure(context.Background(), MeasureOptions{Sizes: Small, Device: "cpu", Threads: 1,
		Progress: func(done, n int, what string) { seen, total = done, n }})
	if err != nil {
		t.Fatal(err)
	}
	p := m.Profile
	if p.Device == "" {
		t.Error("the profile names no device")
	}
	if seen != total || total != len(p.Entries) {
		t.Errorf("progress reached %d of %d; the profile has %d entries", seen, total, len(p.Entries))
	}
	checkCPUProfile(t, p)
}

// TestMeasuredCPUProfile reads the full profile `rulebook profile`
// measured on the development machine (BENCHMARKS.md, Done-when 3) and
// holds it to the same checks.
func TestMeasuredCPUProfile(t *testing.T) {
	p, err := Load(filepath.Join("testdata", "xeon-cpu-torch2.15-ops.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 88 || !strings.Contains(p.Device, "PyTorch 2.15.0") {
		t.Errorf("%d entries on %q, want 88 measured with PyTorch 2.15.0", len(p.Entries), p.Device)
	}
	checkCPUProfile(t, p)
}

// checkCPUProfile holds a profile measured on a CPU to what the script
// claims: every operator kind in fp32 and (Adam aside) bf16, the computed
// columns right, and a round trip through Write and Parse.
func checkCPUProfile(t *testing.T, p *Profile) {
	t.Helper()
	if got := p.Precisions(); !reflect.DeepEqual(got, []cluster.Precision{cluster.BF16, cluster.FP32}) {
		t.Errorf("precisions %v, want bf16 and fp32 on a CPU", got)
	}
	for _, k := range kinds {
		if len(p.Of(k.kind, cluster.FP32)) == 0 {
			t.Errorf("no %s in fp32", k.kind)
		}
		adam := k.kind == AdamFused || k.kind == AdamForeach
		if !adam && len(p.Of(k.kind, cluster.BF16)) == 0 {
			t.Errorf("no %s in bf16", k.kind)
		}
	}
	checkColumns(t, p)
	roundTrip(t, p)
}

// checkColumns recomputes the GFLOP and MB columns of the products.
func checkColumns(t *testing.T, p *Profile) {
	t.Helper()
	for _, e := range p.Entries {
		if e.Kind != Linear {
			continue
		}
		tk, in, out := float64(e.Shape.Dims[0]), float64(e.Shape.Dims[1]), float64(e.Shape.Dims[2])
		bytes := 4.0
		if e.Precision == cluster.BF16 {
			bytes = 2
		}
		gflop, mb := 2*tk*in*out/1e9, (tk*in+in*out+tk*out)*bytes/1e6
		if math.Abs(e.GFLOP-gflop) > 1e-5*gflop || math.Abs(e.MB-mb) > 1e-5*mb {
			t.Errorf("line %d: %s %s: %g GFLOP and %g MB, want %g and %g", e.Line, e.Kind, e.Shape, e.GFLOP, e.MB, gflop, mb)
		}
	}
}

// roundTrip writes p and reads it back to the same device and entries.
func roundTrip(t *testing.T, p *Profile) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, p); err != nil {
		t.Fatal(err)
	}
	again, err := Parse("again", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if again.Device != p.Device || len(again.Entries) != len(p.Entries) {
		t.Fatalf("device %q and %d entries back, want %q and %d", again.Device, len(again.Entries), p.Device, len(p.Entries))
	}
	for i := range p.Entries {
		a, b := p.Entries[i], again.Entries[i]
		a.Line, b.Line = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("entry %d: %+v back as %+v", i, a, b)
		}
	}
}

// TestMeasureWithoutTorch: no interpreter, one without torch (a real venv
// with nothing installed), and one that fails, each give their own typed
// error.
func TestMeasureWithoutTorch(t *testing.T) {
	venv := filepath.Join(t.TempDir(), "venv")
	if err := exec.Command("python3", "-m", "venv", "--without-pip", venv).Run(); err != nil {
		t.Skipf("python3 cannot make a venv: %v", err)
	}
	falsePath, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false command")
	}
	cases := []struct {
		python, missing string
		status          int
	}{
		{filepath.Join(t.TempDir(), "no-python"), "python", 0},
		{filepath.Join(venv, "bin", "python"), "torch", 0},
		{falsePath, "", 1},
	}
	for _, c := range cases {
		_, err := Measure(context.Background(), MeasureOptions{Python: c.python, Sizes: Small, Device: "cpu"})
		var missing *MissingError
		var failed *ScriptError
		switch {
		case c.missing != "" && (!errors.As(err, &missing) || missing.What != c.missing):
			t.Errorf("%s: %v, want %s missing", c.python, err, c.missing)
		case c.missing == "" && (!errors.As(err, &failed) || failed.Status != c.status):
			t.Errorf("%s: %v, want the script failing with status %d", c.python, err, c.status)
		}
	}
	if _, err := ParseSizes("huge"); err == nil {
		t.Error("size set huge accepted")
	}
}

// TestProgressLines: the script's progress lines are read, and anything
// else on its standard error is not taken for one.
func TestProgressLines(t *testing.T) {
	cases := []struct {
		line        string
		done, total int
		what        string
		ok          bool
	}{
		{"progress 3/48 linear 32x64->64 fp32", 3, 48, "linear 32x64->64 fp32", true},
		{"progress 48/48 adam_fused 100000 fp32", 48, 48, "adam_fused 100000 fp32", true},
		{"progress x/48 linear", 0, 0, "", false},
		{"progress 3 linear", 0, 0, "", false},
		{"Traceback (most recent call last):", 0, 0, "", false},
	}
	for _, c := range cases {
		done, total, what, ok := parseProgress(c.line)
		if done != c.done || total != c.total || what != c.what || ok != c.ok {
			t.Errorf("%q: %d/%d %q %v, want %d/%d %q %v", c.line, done, total, what, ok, c.done, c.total, c.what, c.ok)
		}
	}
}

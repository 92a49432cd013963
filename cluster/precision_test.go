package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/checked"
)

// TestPrecisionPeaks: each preset carries a peak per precision it has
// (the V100 no bf16 and no tf32), defaults to its best 16-bit precision,
// and refuses one it lacks with ErrNoPeak; a machine file may give the
// peaks, each absent (0) or in range, and one without them prices fp32.
func TestPrecisionPeaks(t *testing.T) {
	for _, c := range []struct {
		preset string
		def    Precision
		lacks  []Precision
	}{
		{"summit", FP16, []Precision{BF16, TF32}},
		{"dgx-a100", BF16, nil},
		{"h100", BF16, nil},
		{"h200", BF16, nil},
	} {
		m, err := Preset(c.preset, 1)
		if err != nil {
			t.Fatal(err)
		}
		d := m.Device
		if d.DefaultPrecision() != c.def || d.Peak(FP32) != d.PeakFLOPS {
			t.Errorf("%s: default %s, want %s", c.preset, d.DefaultPrecision(), c.def)
		}
		for _, p := range Precisions {
			lacks := false
			for _, q := range c.lacks {
				lacks = lacks || p == q
			}
			err := d.CheckPrecision(p)
			if errors.Is(err, ErrNoPeak) != lacks || (!lacks && d.Peak(p) < d.PeakFLOPS) {
				t.Errorf("%s %s: %v, peak %g", c.preset, p, err, d.Peak(p))
			}
		}
	}
	dir := t.TempDir()
	file := func(peaks string) string {
		path := filepath.Join(dir, "m.json")
		os.WriteFile(path, []byte(`{"nodes": 1, "devices_per_node": 1, "device": {"name": "X", "peak_flops": 1e13, `+peaks+
			`"memory_bandwidth": 1e12, "memory_bytes": 1e10}, "intra_node": {"bandwidth": 1e11}, "inter_node": {"bandwidth": 1e10}}`), 0o644)
		return path
	}
	m, err := Parse(file(`"peak_flops_bf16": 3e14, "peak_flops_tf32": 1.5e14, `))
	if err != nil || m.Device.DefaultPrecision() != BF16 || m.Device.Has(FP16) || m.Device.Peak(TF32) != 1.5e14 {
		t.Errorf("peaks from a file: %+v, %v", m.Device, err)
	}
	if m, err := Parse(file("")); err != nil || m.Device.DefaultPrecision() != FP32 {
		t.Errorf("no peaks: %+v, %v", m.Device, err)
	}
	for _, bad := range []string{`"peak_flops_bf16": -1, `, `"peak_flops_fp16": 5, `, `"peak_flops_tf32": 1e300, `} {
		if _, err := Parse(file(bad)); !errors.Is(err, checked.ErrRange) || !strings.Contains(err.Error(), "device.peak_flops_") {
			t.Errorf("%s: %v, want checked.ErrRange naming the field", bad, err)
		}
	}
	if _, err := Parse(file(`"peak_flops_fp8": 1e15, `)); err == nil || !strings.Contains(err.Error(), `unknown field "peak_flops_fp8"`) {
		t.Errorf("unknown peak: %v", err)
	}
}

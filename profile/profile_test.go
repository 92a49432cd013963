package profile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/internal/testfiles"
)

// TestSharedProfileRoundTrips reads the shared H200 profile, writes it and
// reads it back to the same entries.
func TestSharedProfileRoundTrips(t *testing.T) {
	p, err := Load(testfiles.Shared(t, "devices", "h200-torch2.11-ops.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 158 {
		t.Errorf("read %d entries, want the file's 158", len(p.Entries))
	}
	p.Device = "NVIDIA H200"
	roundTrip(t, p)
	e, ok := p.Find(Linear, LinearShape(512, 1024, 4096), cluster.BF16)
	if !ok || e.ForwardMS != 0.0314 || e.Forward() != 0.0314e-3 {
		t.Errorf("linear 512x1024->4096 bf16: %+v, %v", e, ok)
	}
	if got := p.Precisions(); !reflect.DeepEqual(got, []cluster.Precision{cluster.BF16, cluster.TF32, cluster.FP32}) {
		t.Errorf("precisions %v", got)
	}
}

// TestBuiltinIsTheSharedFile: the shipped H200 profile is the measured one.
func TestBuiltinIsTheSharedFile(t *testing.T) {
	shared, err := os.ReadFile(testfiles.Shared(t, "devices", "h200-torch2.11-ops.csv"))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := builtin.ReadFile("devices/h200-torch2.11-ops.csv")
	if err != nil || !bytes.Equal(ours, shared) {
		t.Fatalf("the built-in profile differs from ../shared's (%v)", err)
	}
	p, err := Builtin("h200-torch2.11-ops.csv")
	if err != nil || p.Device == "" {
		t.Fatalf("Builtin: %v, device %q", err, p.Device)
	}
}

// TestBadProfilesSayWhere: each bad line is refused with the file, the
// line and what was expected.
func TestBadProfilesSayWhere(t *testing.T) {
	good := "linear,512x1024->1024,fp32,0.0529,0.3865,1.074,8.389"
	cases := []struct{ name, text, want string }{
		{"unknown operator", Header + "\nmatmul,512x1024->1024,fp32,1,1,1,1\n", "bad.csv:2: unknown operator \"matmul\""},
		{"negative time", Header + "\n" + good + "\nrelu,4096x1024,fp32,-0.02,0.11,0.004,33.5\n", "bad.csv:3: fwd_ms is negative"},
		{"missing time", Header + "\nrelu,4096x1024,fp32,0.02,,0.004,33.5\n", "bad.csv:2: bwd_ms is missing"},
		{"zero forward", Header + "\nrelu,4096x1024,fp32,0,0.1,0.004,33.5\n", "bad.csv:2: fwd_ms is zero"},
		{"not a number", Header + "\nrelu,4096x1024,fp32,fast,0.1,0.004,33.5\n", "bad.csv:2: fwd_ms \"fast\" is not a number"},
		{"NaN", Header + "\nrelu,4096x1024,fp32,NaN,0.1,0.004,33.5\n", "bad.csv:2: fwd_ms \"NaN\" is not a number"},
		{"unknown precision", Header + "\nrelu,4096x1024,fp8,0.02,0.1,0.004,33.5\n", "bad.csv:2: mode: unknown precision \"fp8\""},
		{"bad shape", Header + "\nlinear,512x1024,fp32,0.02,0.1,0.004,33.5\n", "bad.csv:2: shape \"512x1024\" of linear: expected tokens x in -> out"},
		{"zero size", Header + "\nrelu,0x1024,fp32,0.02,0.1,0.004,33.5\n", "bad.csv:2: shape \"0x1024\" of relu"},
		{"fields", Header + "\nrelu,4096x1024,fp32,0.02\n", "bad.csv:2: expected 7 fields"},
		{"header", "# device: x\nop,shape,fwd_ms\n", "bad.csv:2: expected the header"},
		{"empty", "", "bad.csv:1: expected the header"},
		{"twice", Header + "\n" + good + "\n" + good + "\n", "bad.csv:3: linear 512x1024->1024 fp32 is measured twice (first on line 2)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.csv")
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			var pe *Error
			if !errors.As(err, &pe) || !strings.HasSuffix(pe.Path, "bad.csv") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want a profile error containing %q", err, c.want)
			}
		})
	}
}

// TestPrecisionTheDeviceLacks names the line of a precision without a peak.
func TestPrecisionTheDeviceLacks(t *testing.T) {
	p, err := Parse("v100.csv", []byte(Header+"\nrelu,4096x1024,fp16,0.02,0.1,0.004,33.5\nrelu,4096x1024,bf16,0.02,0.1,0.004,33.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = p.CheckPrecisions("V100", func(pr cluster.Precision) bool { return pr != cluster.BF16 })
	if err == nil || err.Error() != "v100.csv:3: precision bf16, which the V100 has no peak for" {
		t.Errorf("got %v", err)
	}
}

// TestShapesSpellBack: every kind's shape prints as it was read.
func TestShapesSpellBack(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		text string
	}{
		{Linear, "512x1024->4096"}, {AttentionFused, "b8h16s512d64"}, {Softmax, "4096x1024"},
		{Conv2D, "x32x64x56x56_w64x64x3x3_s1"}, {AdamFused, "100000000 params"},
	} {
		s, err := ParseShape(c.kind, c.text)
		if err != nil || s.String() != c.text {
			t.Errorf("%s %q: %v, back as %q", c.kind, c.text, err, s)
		}
	}
	if got := ConvShape([4]int64{32, 3, 224, 224}, [4]int64{64, 3, 7, 7}, 2).String(); got != "x32x3x224x224_w64x3x7x7_s2" {
		t.Errorf("ConvShape: %q", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(Header + "\nlinear,512x1024->1024,fp32,0.0529,0.3865,1.074,8.389\n"))
	f.Add([]byte("# device: d\n" + Header + "\nadam_fused,100 params,fp32,1,0,0,1600.0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, p); err != nil {
			t.Fatal(err)
		}
		again, err := Parse("again", buf.Bytes())
		if err != nil {
			t.Fatalf("written profile does not read back: %v\n%s", err, buf.String())
		}
		if len(again.Entries) != len(p.Entries) {
			t.Fatalf("%d entries back, want %d", len(again.Entries), len(p.Entries))
		}
	})
}

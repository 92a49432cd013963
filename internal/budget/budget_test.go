package budget

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		bad  bool
	}{
		{in: "8GiB", want: 8 << 30},
		{in: "8 gib", want: 8 << 30},
		{in: "512MiB", want: 512 << 20},
		{in: "16GB", want: 16e9},
		{in: "1TiB", want: 1 << 40},
		{in: "1073741824", want: 1 << 30},
		{in: "2048KiB", want: 2 << 20},
		{in: "8", bad: true},      // below the least budget
		{in: "-1GiB", bad: true},  // negative
		{in: "1.5GiB", bad: true}, // whole numbers only
		{in: "GiB", bad: true},
		{in: "", bad: true},
		{in: "20000000TiB", bad: true}, // past 64 bits
		{in: "8 parsecs", bad: true},
	} {
		b, err := Parse(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("Parse(%q) = %d, want an error", tc.in, b.Bytes())
			}
			continue
		}
		if err != nil || b.Bytes() != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, b.Bytes(), err, tc.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{512, "512 B"}, {1 << 10, "1 KiB"}, {3 << 29, "1.5 GiB"}, {64 << 30, "64 GiB"}, {16 << 40, "16 TiB"},
	} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestElements(t *testing.T) {
	b := New(1 << 30)
	for _, tc := range []struct {
		name  string
		shape []int
		want  uint64
		over  bool
	}{
		{name: "fits", shape: []int{1024, 1024}, want: 4 << 20},
		{name: "exactly", shape: []int{1 << 28}, want: 1 << 30},
		{name: "64 GiB", shape: []int{1 << 16, 1 << 17}, over: true},
		{name: "overflow", shape: []int{1 << 40, 1 << 40}, over: true},
		{name: "zero dimension", shape: []int{1 << 62, 1 << 62, 0}, want: 0},
		{name: "negative", shape: []int{-1, 4}, over: true},
		{name: "scalar", shape: nil, want: 4},
	} {
		got, err := b.Elements("m.onnx: input \"x\"", 4, tc.shape...)
		if tc.over {
			var e *ExceededError
			if !errors.Is(err, ErrExceeded) || !errors.As(err, &e) || !strings.Contains(err.Error(), `m.onnx: input "x" needs`) {
				t.Errorf("%s: got %v, want a refusal naming the input", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

func TestMeter(t *testing.T) {
	m := NewMeter(New(10 << 20))
	for i, tc := range []struct {
		bytes uint64
		ok    bool
	}{
		{4 << 20, true}, {4 << 20, true}, {4 << 20, false}, {2 << 20, true}, {1, false}, {math.MaxUint64, false},
	} {
		err := m.Take("weight", tc.bytes)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrExceeded)) {
			t.Errorf("take %d (%d bytes): %v, want ok=%v", i, tc.bytes, err, tc.ok)
		}
	}
	if m.Used() != 10<<20 {
		t.Errorf("used %d, want 10 MiB", m.Used())
	}
}

func TestMemTotal(t *testing.T) {
	for _, tc := range []struct {
		text string
		want uint64
		bad  bool
	}{
		{text: "MemTotal:       24731708 kB\nMemFree: 1 kB\n", want: 24731708 * 1024},
		{text: "MemFree: 1 kB\n", bad: true},
		{text: "MemTotal: lots kB\n", bad: true},
		{text: "MemTotal: 99999999999999999999 kB\n", bad: true},
	} {
		got, err := memTotal(strings.NewReader(tc.text))
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("memTotal(%q) = %d, %v; want %d (error %v)", tc.text, got, err, tc.want, tc.bad)
		}
	}
	if d := Default().Bytes(); d < minBytes {
		t.Errorf("Default() = %d bytes", d)
	}
}

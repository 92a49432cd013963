package cuda

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKernelSources checks what can be checked of the CUDA C without a
// CUDA compiler: brackets balance, every kernel the runtime launches is
// defined in its source with parameters Args can pass, every defined
// kernel is one the runtime knows, and the kernels that use shared memory
// synchronise (and the others do not).
func TestKernelSources(t *testing.T) {
	if len(KernelNames) != len(Sources()) {
		t.Errorf("KernelNames covers %d sources, Sources lists %d", len(KernelNames), len(Sources()))
	}
	seen := map[string]string{}
	for _, src := range Sources() {
		if err := checkBalanced(src.Code); err != nil {
			t.Errorf("source %s: %v", src.Name, err)
			continue
		}
		decls, err := src.Kernels()
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		names := KernelNames[src]
		for _, name := range names {
			d, ok := decls[name]
			if !ok {
				t.Errorf("source %s does not define kernel %s", src.Name, name)
				continue
			}
			if !strings.Contains(src.Code, kernelMarker+name+"(") {
				t.Errorf("source %s: kernel %s is not declared %q", src.Name, name, kernelMarker+name+"(")
			}
			if other, dup := seen[name]; dup {
				t.Errorf("kernel %s is in sources %s and %s", name, other, src.Name)
			}
			seen[name] = src.Name
			shared := strings.Contains(d.Body, "__shared__")
			reduces := strings.Contains(d.Body, "rb_block_reduce") || strings.Contains(d.Body, "__syncthreads")
			if shared != reduces {
				t.Errorf("kernel %s: __shared__ %v but synchronises %v", name, shared, reduces)
			}
		}
		for name := range decls {
			if !slices.Contains(names, name) {
				t.Errorf("source %s defines kernel %s, which KernelNames does not list", src.Name, name)
			}
		}
		// Every RB_ constant used is declared by the prelude.
		for _, use := range regexp.MustCompile(`\bRB_[A-Z0-9_]+\b`).FindAllString(src.Code, -1) {
			if !strings.Contains(src.Code, use+" =") && !strings.Contains(src.Code, use+" = ") {
				t.Errorf("source %s uses %s, which it does not declare", src.Name, use)
			}
		}
	}
	for _, name := range []string{KernelUnary, KernelClip, KernelBinary, KernelFill, KernelBatchNorm, KernelIm2col,
		KernelPool, KernelGlobalPool, KernelTranspose, KernelConcat, KernelSplit, KernelPad, KernelSoftmax, KernelReduce} {
		if _, ok := seen[name]; !ok {
			t.Errorf("kernel constant %s is in no source", name)
		}
	}
}

// TestSharedConstants checks that the C enums carry the Go values.
func TestSharedConstants(t *testing.T) {
	names := map[string]bool{}
	for _, c := range sharedConstants {
		if names[c.name] {
			t.Errorf("%s is declared twice", c.name)
		}
		names[c.name] = true
		if !strings.Contains(prelude(), fmt.Sprintf("  %s = %d,\n", c.name, c.value)) {
			t.Errorf("the prelude lacks %s = %d", c.name, c.value)
		}
	}
	// Each family's codes are distinct.
	for _, prefix := range []string{"RB_UNARY_", "RB_BINARY_", "RB_REDUCE_", "RB_POOL_", "RB_PAD_"} {
		values := map[int]string{}
		for _, c := range sharedConstants {
			if !strings.HasPrefix(c.name, prefix) {
				continue
			}
			if other, dup := values[c.value]; dup {
				t.Errorf("%s and %s share the value %d", c.name, other, c.value)
			}
			values[c.value] = c.name
		}
	}
}

func TestParseKernels(t *testing.T) {
	good := `struct Shape8 { long long v[8]; };
// a comment with a brace {
extern "C" __global__ void k1(const float* x, float* __restrict__ y, long long n, int op, float a, Shape8 s, const long long* t) {
  if (n) { y[0] = x[0]; }
}
extern "C" __global__ void k2() { }
`
	decls, err := parseKernels(good)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range decls["k1"].Params {
		kinds = append(kinds, p.Type+":"+p.Kind.String())
	}
	want := "const float*:pointer float*:pointer long long:long long int:int float:float Shape8:Shape8 const long long*:pointer"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("k1 parameters %s, want %s", got, want)
	}
	if len(decls["k2"].Params) != 0 || decls["k2"].Body != "{ }" {
		t.Errorf("k2: %+v", decls["k2"])
	}
	for _, bad := range []string{
		`extern "C" __global__ void k(float* x) { if (x) { }`,
		`extern "C" __global__ void k(float* x) { x[0] = 1; ) }`,
		`extern "C" __global__ void k(double x) { }`,
		`extern "C" __global__ void k(float*) { }`,
		`extern "C" __global__ void k(float* x) { } extern "C" __global__ void k(float* x) { }`,
		`__global__ void k(float* x) { }`,
		`extern "C" __global__ void k(float* x) { /* unterminated }`,
		`extern "C" __global__ void k(float* x) { const char* s = "}; }`,
	} {
		if _, err := parseKernels(bad); err == nil {
			t.Errorf("parseKernels accepted %q", bad)
		}
	}
}

func TestArgsMatchKernels(t *testing.T) {
	decl, err := Elementwise.Kernel(KernelUnary)
	if err != nil {
		t.Fatal(err)
	}
	f := &Function{Name: KernelUnary, Params: decl.Params}
	ok := NewArgs().Ptr(0).Ptr(0).I64(10).I32(UnaryRelu).F32(0).F32(0)
	if err := f.CheckArgs(ok); err != nil {
		t.Errorf("matching arguments: %v", err)
	}
	for _, bad := range []*Args{
		NewArgs().Ptr(0).Ptr(0).I32(10).I32(UnaryRelu).F32(0).F32(0),
		NewArgs().Ptr(0).Ptr(0).I64(10).I32(UnaryRelu).F32(0),
		NewArgs().Ptr(0).Ptr(0).I64(10).I32(1 << 40).F32(0).F32(0),
		NewArgs().Ptr(0).Ptr(0).I64(10).Shape(make([]int, 9)).F32(0).F32(0),
	} {
		if err := f.CheckArgs(bad); err == nil {
			t.Errorf("CheckArgs accepted %v", bad.kinds)
		}
	}
	var table allocTable
	table.add(0x1000, 256)
	grid, block := Dim3{1, 1, 1}, Dim3{256, 1, 1}
	if err := f.check(grid, block, NewArgs().Ptr(0x1000).Ptr(0x10fc).I64(1).I32(0).F32(0).F32(0), &table); err != nil {
		t.Errorf("launch inside the allocation: %v", err)
	}
	if err := f.check(grid, block, NewArgs().Ptr(0x1100).Ptr(0).I64(1).I32(0).F32(0).F32(0), &table); err == nil {
		t.Error("a pointer past the allocation was accepted")
	}
	for _, dims := range [][2]Dim3{{{0, 1, 1}, block}, {grid, {2048, 1, 1}}, {{1, 70000, 1}, block}} {
		if err := f.check(dims[0], dims[1], ok, &table); err == nil {
			t.Errorf("launch with grid %v block %v accepted", dims[0], dims[1])
		}
	}
}

func TestAllocTable(t *testing.T) {
	var a allocTable
	a.add(0x3000, 100)
	a.add(0x1000, 100)
	a.add(0x2000, 0x1000)
	for _, tc := range []struct {
		p     Ptr
		bytes int
		want  bool
	}{
		{0x1000, 100, true}, {0x1000, 101, false}, {0x1063, 1, true}, {0x1064, 1, false},
		{0x2fff, 1, true}, {0x2fff, 2, false}, {0x3000, 100, true}, {0x0fff, 1, false},
	} {
		if got := a.contains(tc.p, tc.bytes); got != tc.want {
			t.Errorf("contains(%#x, %d) = %v, want %v", uint64(tc.p), tc.bytes, got, tc.want)
		}
	}
	if size, ok := a.remove(0x2000); !ok || size != 0x1000 {
		t.Errorf("remove = %d %v", size, ok)
	}
	if _, ok := a.remove(0x2000); ok {
		t.Error("removed twice")
	}
	if a.contains(0x2000, 1) {
		t.Error("a removed allocation still contains its start")
	}
}

func TestGemmCheck(t *testing.T) {
	var a allocTable
	a.add(0x10000, 4*1000)
	a.add(0x20000, 4*1000)
	a.add(0x30000, 4*1000)
	// 10×20 = (10×30)·(30×20), column-major, tight.
	g := Gemm{M: 10, N: 20, K: 30, A: 0x10000, LDA: 10, B: 0x20000, LDB: 30, C: 0x30000, LDC: 10, Batch: 1}
	if err := g.check(&a); err != nil {
		t.Errorf("valid product: %v", err)
	}
	bad := g
	bad.LDA = 9
	if err := bad.check(&a); err == nil {
		t.Error("lda below m accepted")
	}
	bad = g
	bad.TransA, bad.LDA = true, 30 // A is then 30×10 stored: 300 floats, fits
	if err := bad.check(&a); err != nil {
		t.Errorf("transposed A: %v", err)
	}
	bad = g
	bad.Batch, bad.StrideC = 2, 200 // C spans 400 floats: fits; A and B with stride 0
	if err := bad.check(&a); err != nil {
		t.Errorf("batch with a broadcast operand: %v", err)
	}
	bad.StrideC = 900
	if err := bad.check(&a); err == nil {
		t.Error("C past its allocation accepted")
	}
}

package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProbe runs everywhere: on a machine without CUDA it must report
// ErrUnavailable with a reason, never panic.
func TestProbe(t *testing.T) {
	d, err := Probe()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Probe failed without ErrUnavailable: %v", err)
		}
		t.Skipf("no GPU here: %v", err)
	}
	if d.Name == "" || d.Major == 0 || d.Memory == 0 {
		t.Errorf("incomplete device description: %+v", d)
	}
	t.Logf("GPU: %s", d)
}

func TestMissingLibraryIsExplained(t *testing.T) {
	_, tried, err := openFirst([]string{"libdoes-not-exist.so.7"})
	if err == nil || len(tried) != 1 {
		t.Fatalf("opening a missing library: %v %v", tried, err)
	}
}

// TestOpen opens the GPU where there is one; elsewhere the error must wrap
// ErrUnavailable and name what was looked for.
func TestOpen(t *testing.T) {
	c, err := Open()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Open failed without ErrUnavailable: %v", err)
		}
		if _, probeErr := Probe(); probeErr != nil && !strings.Contains(err.Error(), "libcuda") {
			t.Errorf("without a driver the error should name libcuda: %v", err)
		}
		t.Skipf("no GPU here: %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("opened %s", c.Describe())
	p, err := c.Alloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, 256)
	for i := range in {
		in[i] = float32(i)
	}
	if err := UploadFloats(c, p, in); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 256)
	if err := DownloadFloats(c, out, p); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if out[i] != in[i] {
			t.Fatalf("round trip: element %d is %v, want %v", i, out[i], in[i])
		}
	}
	if err := c.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(p); err == nil {
		t.Error("freeing twice: no error")
	}
}

// TestLibrariesMissingHere checks, where NVRTC and cuBLAS are absent, that
// the errors wrap ErrUnavailable and list every name tried, in order.
func TestLibrariesMissingHere(t *testing.T) {
	for _, lib := range []struct {
		load  func() error
		names []string
	}{
		{func() error { _, err := loadNVRTC(); return err }, nvrtcLibraries},
		{func() error { _, err := loadCUBLAS(); return err }, cublasLibraries},
	} {
		err := lib.load()
		if err == nil {
			t.Logf("%s loads here", lib.names[0])
			continue
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("error does not wrap ErrUnavailable: %v", err)
		}
		if !strings.Contains(err.Error(), strings.Join(lib.names, ", ")) {
			t.Errorf("error does not list %v in order: %v", lib.names, err)
		}
	}
}

func TestLibraryOrder(t *testing.T) {
	if want := []string{"libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so.11.2"}; strings.Join(nvrtcLibraries, " ") != strings.Join(want, " ") {
		t.Errorf("NVRTC names %v, want %v", nvrtcLibraries, want)
	}
	if want := []string{"libcublas.so", "libcublas.so.12", "libcublas.so.13", "libcublas.so.11"}; strings.Join(cublasLibraries, " ") != strings.Join(want, " ") {
		t.Errorf("cuBLAS names %v, want %v", cublasLibraries, want)
	}
	if driverLibraries[0] != "libcuda.so.1" {
		t.Errorf("driver names %v start with %s, want libcuda.so.1", driverLibraries, driverLibraries[0])
	}
	glob := func(pattern string) ([]string, error) {
		switch pattern {
		case "/usr/local/cuda*/lib64/libnvrtc.so*":
			return []string{
				"/usr/local/cuda-12.4/lib64/libnvrtc.so.12",
				"/usr/local/cuda-13.0/lib64/libnvrtc.so.13",
				"/usr/local/cuda-12.4/lib64/libnvrtc-builtins.so.12.4",
				"/usr/local/cuda-13.0/lib64/libnvrtc.so.13",
			}, nil
		case "/usr/local/cuda*/targets/*/lib/libnvrtc.so*":
			return []string{"/usr/local/cuda-12.4/targets/x86_64-linux/lib/libnvrtc.so.12"}, nil
		}
		return nil, nil
	}
	got := libraryCandidates(nvrtcLibraries, "libnvrtc.so", toolkitDirs, glob)
	want := []string{
		"libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so.11.2",
		"/usr/local/cuda-13.0/lib64/libnvrtc.so.13",
		"/usr/local/cuda-12.4/lib64/libnvrtc.so.12",
		"/usr/local/cuda-12.4/targets/x86_64-linux/lib/libnvrtc.so.12",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cublas := libraryCandidates(cublasLibraries, "libcublas.so", []string{"/x"}, func(string) ([]string, error) {
		return []string{"/x/libcublasLt.so.12", "/x/libcublas.so.12"}, nil
	})
	if cublas[len(cublas)-1] != "/x/libcublas.so.12" || len(cublas) != len(cublasLibraries)+1 {
		t.Errorf("cuBLAS candidates %v: the Lt library must be skipped", cublas)
	}
	// cuBLASLt's own search keeps its files (the glob gives only names
	// starting with the base).
	lt := libraryCandidates(ltLibraries, "libcublasLt.so", []string{"/x"}, func(string) ([]string, error) {
		return []string{"/x/libcublasLt.so.12"}, nil
	})
	if lt[len(lt)-1] != "/x/libcublasLt.so.12" || len(lt) != len(ltLibraries)+1 {
		t.Errorf("cuBLASLt candidates %v", lt)
	}
}

func TestPickArch(t *testing.T) {
	for _, tc := range []struct {
		device    int
		supported []int
		arch      int
		exact, ok bool
	}{
		{90, nil, 90, true, true},
		{90, []int{50, 60, 70, 80, 86, 89, 90}, 90, true, true},
		{90, []int{50, 60, 70, 80, 86}, 86, false, true},
		{100, []int{75, 80, 90}, 90, false, true},
		{50, []int{60, 70}, 0, false, false},
	} {
		arch, exact, ok := pickArch(tc.device, tc.supported)
		if arch != tc.arch || exact != tc.exact || ok != tc.ok {
			t.Errorf("pickArch(%d, %v) = %d %v %v, want %d %v %v", tc.device, tc.supported, arch, exact, ok, tc.arch, tc.exact, tc.ok)
		}
	}
}

func TestDescribeWithoutDriver(t *testing.T) {
	var d *driver
	if got := d.describe(700); got != "CUDA_ERROR_ILLEGAL_ADDRESS (700)" {
		t.Errorf("describe(700) = %q", got)
	}
	if got := cublasStatusName(7); got != "CUBLAS_STATUS_INVALID_VALUE" {
		t.Errorf("cublasStatusName(7) = %q", got)
	}
}

// TestPythonWheelDirs: a virtual environment's python3 on PATH adds its
// NVIDIA wheel directories (PyTorch's cuDNN lives there), and a real
// library in one is found.
func TestPythonWheelDirs(t *testing.T) {
	venv := t.TempDir()
	bin, lib := filepath.Join(venv, "bin"), filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cudnn", "lib")
	for _, d := range []string{bin, lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(bin, "python3"), filepath.Join(lib, "libcudnn.so.9")} {
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := strings.Join([]string{"", t.TempDir(), bin, bin + "/"}, string(filepath.ListSeparator))
	dirs := pythonWheelDirs(path)
	want := []string{filepath.Join(venv, "lib/python3*/site-packages/nvidia/*/lib"), filepath.Join(venv, "lib/python3*/dist-packages/nvidia/*/lib")}
	if !slices.Equal(dirs, want) {
		t.Fatalf("dirs %v, want %v", dirs, want)
	}
	got := libraryCandidates(cudnnLibraries, "libcudnn.so", dirs, filepath.Glob)
	if !slices.Contains(got, filepath.Join(lib, "libcudnn.so.9")) {
		t.Errorf("candidates %v lack the environment's cuDNN", got)
	}
}

// Package cuda reaches an NVIDIA GPU through the CUDA driver API, NVRTC and
// cuBLAS, all loaded at run time with purego. The program builds and runs
// where no CUDA is installed, and only asking for the GPU fails. Open
// returns a Context, which the runtime's CUDA executor uses through the
// Backend interface. The Emulator implements Backend on the CPU, so the
// executor and the kernels are tested where there is no GPU.
// docs/runtime.md ("Other backends") tells the rest.
package cuda

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrUnavailable wraps every reason the GPU cannot be used: no driver
// library, no device, a driver that fails to initialise, or no NVRTC or
// cuBLAS library.
var ErrUnavailable = errors.New("CUDA is not available")

// driverLibraries are tried in order; the first that loads is used.
var driverLibraries = []string{"libcuda.so.1", "libcuda.so"}

// driver holds the driver API entry points we call. CUresult is a C enum
// (int32), CUdevice an int, handles (CUcontext, CUstream, CUmodule,
// CUfunction, CUevent) are pointers, CUdeviceptr and size_t are 64-bit on
// every platform CUDA supports, so they are uintptr here.
type driver struct {
	cuInit             func(flags uint32) int32
	cuDriverGetVersion func(v *int32) int32
	cuDeviceGetCount   func(n *int32) int32
	cuDeviceGet        func(dev *int32, ordinal int32) int32
	cuDeviceGetName    func(name *byte, n int32, dev int32) int32
	cuDeviceGetAttr    func(v *int32, attr int32, dev int32) int32
	cuDeviceTotalMem   func(bytes *uintptr, dev int32) int32

	// Optional for Probe, required by Open (checked there).
	cuGetErrorName            func(rc int32, s **byte) int32
	cuGetErrorString          func(rc int32, s **byte) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuStreamCreate            func(s *uintptr, flags uint32) int32
	cuStreamDestroy           func(s uintptr) int32
	cuStreamSynchronize       func(s uintptr) int32
	cuMemAlloc                func(p *uintptr, bytes uintptr) int32
	cuMemFree                 func(p uintptr) int32
	cuMemcpyHtoDAsync         func(dst uintptr, src unsafe.Pointer, bytes uintptr, s uintptr) int32
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uintptr, bytes uintptr, s uintptr) int32
	cuMemcpyDtoDAsync         func(dst, src uintptr, bytes uintptr, s uintptr) int32
	cuModuleLoadData          func(m *uintptr, image unsafe.Pointer) int32
	cuModuleGetFunction       func(f *uintptr, m uintptr, name string) int32
	cuModuleUnload            func(m uintptr) int32
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, sharedBytes uint32, s uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	cuEventCreate             func(e *uintptr, flags uint32) int32
	cuEventRecord             func(e uintptr, s uintptr) int32
	cuEventSynchronize        func(e uintptr) int32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) int32
	cuEventDestroy            func(e uintptr) int32

	// CUDA graphs (CUDA 11.4 and later); a driver without them runs
	// plain launches.
	cuStreamBeginCapture        func(s uintptr, mode int32) int32
	cuStreamEndCapture          func(s uintptr, g *uintptr) int32
	cuGraphInstantiateWithFlags func(exec *uintptr, g uintptr, flags uint64) int32
	cuGraphLaunch               func(exec uintptr, s uintptr) int32
	cuGraphExecDestroy          func(exec uintptr) int32
	cuGraphDestroy              func(g uintptr) int32

	// missing names the execution entry points the library lacks; Open
	// refuses such a driver, Probe does not need them. missingGraph
	// names the graph entry points it lacks.
	missing, missingGraph []string
}

// Device attributes (CUdevice_attribute).
const (
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

// Device describes the GPU a backend would run on.
type Device struct {
	Name          string
	Major, Minor  int // compute capability
	Memory        uint64
	DriverVersion int // e.g. 12040 for CUDA 12.4
}

func (d Device) String() string {
	return fmt.Sprintf("%s (compute %d.%d, %.0f GiB, driver %d.%d)", d.Name, d.Major, d.Minor,
		float64(d.Memory)/(1<<30), d.DriverVersion/1000, d.DriverVersion%1000/10)
}

// Probe loads the driver and describes device 0, or explains why there is
// none. It never panics, with or without a GPU.
func Probe() (Device, error) {
	drv, err := loadDriver()
	if err != nil {
		return Device{}, err
	}
	d, _, err := drv.device0()
	return d, err
}

// device0 initialises the driver and describes device 0.
func (drv *driver) device0() (Device, int32, error) {
	if rc := drv.cuInit(0); rc != 0 {
		return Device{}, 0, fmt.Errorf("%w: cuInit failed: %s", ErrUnavailable, drv.describe(rc))
	}
	var n int32
	if rc := drv.cuDeviceGetCount(&n); rc != 0 || n == 0 {
		return Device{}, 0, fmt.Errorf("%w: the driver sees no GPU (cuDeviceGetCount: %d devices, %s)", ErrUnavailable, n, drv.describe(rc))
	}
	var dev int32
	if rc := drv.cuDeviceGet(&dev, 0); rc != 0 {
		return Device{}, 0, fmt.Errorf("%w: cuDeviceGet(0) failed: %s", ErrUnavailable, drv.describe(rc))
	}
	var d Device
	name := make([]byte, 256)
	if rc := drv.cuDeviceGetName(&name[0], int32(len(name)), dev); rc == 0 {
		d.Name = cString(name)
	}
	var major, minor, version int32
	var memory uintptr
	drv.cuDeviceGetAttr(&major, attrComputeCapabilityMajor, dev)
	drv.cuDeviceGetAttr(&minor, attrComputeCapabilityMinor, dev)
	drv.cuDeviceTotalMem(&memory, dev)
	drv.cuDriverGetVersion(&version)
	d.Major, d.Minor, d.DriverVersion, d.Memory = int(major), int(minor), int(version), uint64(memory)
	if d.Major == 0 {
		return d, dev, fmt.Errorf("%w: cuDeviceGetAttribute gave no compute capability for %q", ErrUnavailable, d.Name)
	}
	return d, dev, nil
}

func loadDriver() (*driver, error) {
	lib, tried, err := openFirst(driverLibraries)
	if err != nil {
		return nil, fmt.Errorf("%w: no NVIDIA driver library (tried %s: %v); install the NVIDIA driver, or run on the CPU",
			ErrUnavailable, strings.Join(tried, ", "), err)
	}
	d := &driver{}
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"cuInit", &d.cuInit},
		{"cuDriverGetVersion", &d.cuDriverGetVersion},
		{"cuDeviceGetCount", &d.cuDeviceGetCount},
		{"cuDeviceGet", &d.cuDeviceGet},
		{"cuDeviceGetName", &d.cuDeviceGetName},
		{"cuDeviceGetAttribute", &d.cuDeviceGetAttr},
		{"cuDeviceTotalMem_v2", &d.cuDeviceTotalMem},
	} {
		if err := register(lib, "libcuda", s.name, s.fn); err != nil {
			return nil, err
		}
	}
	// The error-name functions are optional everywhere: describe falls
	// back to a table.
	registerOptional(lib, "cuGetErrorName", &d.cuGetErrorName)
	registerOptional(lib, "cuGetErrorString", &d.cuGetErrorString)
	for _, s := range []struct {
		names []string // the first present is used
		fn    any
	}{
		{[]string{"cuDevicePrimaryCtxRetain"}, &d.cuDevicePrimaryCtxRetain},
		{[]string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, &d.cuDevicePrimaryCtxRelease},
		{[]string{"cuCtxSetCurrent"}, &d.cuCtxSetCurrent},
		{[]string{"cuCtxSynchronize"}, &d.cuCtxSynchronize},
		{[]string{"cuStreamCreate"}, &d.cuStreamCreate},
		{[]string{"cuStreamDestroy_v2", "cuStreamDestroy"}, &d.cuStreamDestroy},
		{[]string{"cuStreamSynchronize"}, &d.cuStreamSynchronize},
		{[]string{"cuMemAlloc_v2"}, &d.cuMemAlloc},
		{[]string{"cuMemFree_v2"}, &d.cuMemFree},
		{[]string{"cuMemcpyHtoDAsync_v2"}, &d.cuMemcpyHtoDAsync},
		{[]string{"cuMemcpyDtoHAsync_v2"}, &d.cuMemcpyDtoHAsync},
		{[]string{"cuMemcpyDtoDAsync_v2"}, &d.cuMemcpyDtoDAsync},
		{[]string{"cuModuleLoadData"}, &d.cuModuleLoadData},
		{[]string{"cuModuleGetFunction"}, &d.cuModuleGetFunction},
		{[]string{"cuModuleUnload"}, &d.cuModuleUnload},
		{[]string{"cuLaunchKernel"}, &d.cuLaunchKernel},
		{[]string{"cuEventCreate"}, &d.cuEventCreate},
		{[]string{"cuEventRecord"}, &d.cuEventRecord},
		{[]string{"cuEventSynchronize"}, &d.cuEventSynchronize},
		// CUDA 12.8 added _v2 (same signature, defined for events
		// recorded in graphs); CUDA 13 headers map the name to it.
		{[]string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, &d.cuEventElapsedTime},
		{[]string{"cuEventDestroy_v2", "cuEventDestroy"}, &d.cuEventDestroy},
	} {
		found := false
		for _, name := range s.names {
			if registerOptional(lib, name, s.fn) {
				found = true
				break
			}
		}
		if !found {
			d.missing = append(d.missing, s.names[0])
		}
	}
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"cuStreamBeginCapture_v2", &d.cuStreamBeginCapture},
		{"cuStreamEndCapture", &d.cuStreamEndCapture},
		{"cuGraphInstantiateWithFlags", &d.cuGraphInstantiateWithFlags},
		{"cuGraphLaunch", &d.cuGraphLaunch},
		{"cuGraphExecDestroy", &d.cuGraphExecDestroy},
		{"cuGraphDestroy", &d.cuGraphDestroy},
	} {
		if !registerOptional(lib, s.name, s.fn) {
			d.missingGraph = append(d.missingGraph, s.name)
		}
	}
	return d, nil
}

// openFirst opens the first library of names that loads.
func openFirst(names []string) (lib uintptr, tried []string, err error) {
	for _, name := range names {
		tried = append(tried, name)
		if lib, err = purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return lib, tried, nil
		}
	}
	if err == nil {
		err = errors.New("no candidate library names")
	}
	return 0, tried, err
}

// register binds a library symbol to a Go function variable, turning
// purego's panic on a missing symbol into an error.
func register(lib uintptr, libName, name string, fn any) error {
	sym, err := purego.Dlsym(lib, name)
	if err != nil || sym == 0 {
		return fmt.Errorf("%w: %s lacks %s (too old a version?): %v", ErrUnavailable, libName, name, err)
	}
	purego.RegisterFunc(fn, sym)
	return nil
}

// registerOptional binds a symbol if the library has it.
func registerOptional(lib uintptr, name string, fn any) bool {
	sym, err := purego.Dlsym(lib, name)
	if err != nil || sym == 0 {
		return false
	}
	purego.RegisterFunc(fn, sym)
	return true
}

// describe renders a CUresult as "CUDA_ERROR_NAME (code): description",
// asking the driver for the name when it can.
func (drv *driver) describe(rc int32) string {
	name, text := "", ""
	if drv != nil && drv.cuGetErrorName != nil {
		var p *byte
		if drv.cuGetErrorName(rc, &p) == 0 && p != nil {
			name = goString(p)
		}
	}
	if drv != nil && drv.cuGetErrorString != nil {
		var p *byte
		if drv.cuGetErrorString(rc, &p) == 0 && p != nil {
			text = goString(p)
		}
	}
	if name == "" {
		name = errorName(rc)
	}
	if text == "" || text == name {
		return fmt.Sprintf("%s (%d)", name, rc)
	}
	return fmt.Sprintf("%s (%d): %s", name, rc, text)
}

// errorName names driver errors (cudaError_enum) when the driver cannot.
func errorName(rc int32) string {
	switch rc {
	case 0:
		return "CUDA_SUCCESS"
	case 1:
		return "CUDA_ERROR_INVALID_VALUE"
	case 2:
		return "CUDA_ERROR_OUT_OF_MEMORY"
	case 3:
		return "CUDA_ERROR_NOT_INITIALIZED"
	case 4:
		return "CUDA_ERROR_DEINITIALIZED"
	case 35:
		return "CUDA_ERROR_INSUFFICIENT_DRIVER"
	case 100:
		return "CUDA_ERROR_NO_DEVICE"
	case 101:
		return "CUDA_ERROR_INVALID_DEVICE"
	case 200:
		return "CUDA_ERROR_INVALID_IMAGE"
	case 201:
		return "CUDA_ERROR_INVALID_CONTEXT"
	case 209:
		return "CUDA_ERROR_NO_BINARY_FOR_GPU"
	case 218:
		return "CUDA_ERROR_INVALID_PTX"
	case 222:
		return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
	case 400:
		return "CUDA_ERROR_INVALID_HANDLE"
	case 500:
		return "CUDA_ERROR_NOT_FOUND"
	case 700:
		return "CUDA_ERROR_ILLEGAL_ADDRESS"
	case 701:
		return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
	case 702:
		return "CUDA_ERROR_LAUNCH_TIMEOUT"
	case 719:
		return "CUDA_ERROR_LAUNCH_FAILED"
	case 999:
		return "CUDA_ERROR_UNKNOWN"
	}
	return "CUDA error"
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for ptr := unsafe.Pointer(p); *(*byte)(ptr) != 0; ptr = unsafe.Add(ptr, 1) {
		b = append(b, *(*byte)(ptr))
		if len(b) > 1<<16 {
			break
		}
	}
	return string(b)
}

// cString returns the text before the first NUL of a C buffer.
func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// Package cuda reaches an NVIDIA GPU through the CUDA driver API, NVRTC and
// cuBLAS, all loaded at run time with purego: the program builds and runs
// where no CUDA is installed, and only asking for the GPU fails, with a
// message that says what is missing.
package cuda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
)

// ErrUnavailable wraps every reason the GPU cannot be used: no driver
// library, no device, or a driver that fails to initialise.
var ErrUnavailable = errors.New("CUDA is not available")

// driverLibraries are tried in order; the first that loads is used.
var driverLibraries = []string{"libcuda.so.1", "libcuda.so"}

// driver holds the driver API entry points we call.
type driver struct {
	cuInit             func(flags uint32) int32
	cuDriverGetVersion func(v *int32) int32
	cuDeviceGetCount   func(n *int32) int32
	cuDeviceGet        func(dev *int32, ordinal int32) int32
	cuDeviceGetName    func(name *byte, n int32, dev int32) int32
	cuDeviceGetAttr    func(v *int32, attr int32, dev int32) int32
	cuDeviceTotalMem   func(bytes *uint64, dev int32) int32
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
	if rc := drv.cuInit(0); rc != 0 {
		return Device{}, fmt.Errorf("%w: cuInit failed with CUDA error %d (%s)", ErrUnavailable, rc, errorName(rc))
	}
	var n int32
	if rc := drv.cuDeviceGetCount(&n); rc != 0 || n == 0 {
		return Device{}, fmt.Errorf("%w: the driver sees no GPU (cuDeviceGetCount: %d devices, error %d)", ErrUnavailable, n, rc)
	}
	var dev int32
	if rc := drv.cuDeviceGet(&dev, 0); rc != 0 {
		return Device{}, fmt.Errorf("%w: cuDeviceGet(0) failed with CUDA error %d", ErrUnavailable, rc)
	}
	var d Device
	name := make([]byte, 256)
	if rc := drv.cuDeviceGetName(&name[0], int32(len(name)), dev); rc == 0 {
		d.Name = strings.TrimRight(string(name), "\x00")
	}
	var major, minor, version int32
	drv.cuDeviceGetAttr(&major, attrComputeCapabilityMajor, dev)
	drv.cuDeviceGetAttr(&minor, attrComputeCapabilityMinor, dev)
	drv.cuDeviceTotalMem(&d.Memory, dev)
	drv.cuDriverGetVersion(&version)
	d.Major, d.Minor, d.DriverVersion = int(major), int(minor), int(version)
	return d, nil
}

func loadDriver() (*driver, error) {
	lib, tried, err := openFirst(driverLibraries)
	if err != nil {
		return nil, fmt.Errorf("%w: no NVIDIA driver library (tried %s: %v); install the NVIDIA driver or use --backend cpu",
			ErrUnavailable, strings.Join(tried, ", "), err)
	}
	d := &driver{}
	for name, fn := range map[string]any{
		"cuInit":               &d.cuInit,
		"cuDriverGetVersion":   &d.cuDriverGetVersion,
		"cuDeviceGetCount":     &d.cuDeviceGetCount,
		"cuDeviceGet":          &d.cuDeviceGet,
		"cuDeviceGetName":      &d.cuDeviceGetName,
		"cuDeviceGetAttribute": &d.cuDeviceGetAttr,
		"cuDeviceTotalMem_v2":  &d.cuDeviceTotalMem,
	} {
		if err := register(lib, name, fn); err != nil {
			return nil, err
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
	return 0, tried, err
}

// register binds a library symbol to a Go function variable, turning
// purego's panic on a missing symbol into an error.
func register(lib uintptr, name string, fn any) error {
	sym, err := purego.Dlsym(lib, name)
	if err != nil {
		return fmt.Errorf("%w: the CUDA library lacks %s (too old a driver?): %v", ErrUnavailable, name, err)
	}
	purego.RegisterFunc(fn, sym)
	return nil
}

// errorName names the few driver errors a user can act on.
func errorName(rc int32) string {
	switch rc {
	case 3:
		return "not initialized"
	case 35:
		return "driver older than the CUDA runtime"
	case 100:
		return "no CUDA-capable device"
	case 999:
		return "unknown"
	}
	return "see cudaError_enum"
}

package profile

import (
	"embed"
	"fmt"
)

// The profiles shipped with rulebook, so that the presets measured on real
// hardware work without ../shared. h200-torch2.11-ops.csv was measured on
// one NVIDIA H200 (driver 580.159.04, PyTorch 2.11.0+cu130, CUDA 13.0) on
// 2026-11-27; ../shared/devices/README.md says how.
//
//go:embed devices/*.csv
var builtin embed.FS

// builtinDevices names each shipped profile's device.
var builtinDevices = map[string]string{
	"h200-torch2.11-ops.csv": "NVIDIA H200 (PyTorch 2.11.0+cu130, CUDA 13.0)",
}

// Builtin is a shipped profile by file name.
func Builtin(name string) (*Profile, error) {
	data, err := builtin.ReadFile("devices/" + name)
	if err != nil {
		return nil, fmt.Errorf("no built-in profile %q", name)
	}
	p, err := Parse("built-in "+name, data)
	if err != nil {
		return nil, err
	}
	if p.Device == "" {
		p.Device = builtinDevices[name]
	}
	return p, nil
}

package optimizer

import (
	"fmt"
	"path/filepath"

	"rulebook/onnx"
	"rulebook/runtime"
)

// LoadModel reads an ONNX model, loads it with the runtime, which supplies
// shapes and weights (external ones are looked for beside the file), and
// maps it onto the registry.
func LoadModel(path string, opt runtime.LoadOptions) (*runtime.Model, *Graph, *runtime.LoadReport, error) {
	m, err := onnx.ReadModel(path)
	if err != nil {
		return nil, nil, nil, err
	}
	rt, report, err := runtime.FromONNX(m, filepath.Dir(path), opt)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	g, err := FromONNX(m, rt)
	return rt, g, report, err
}

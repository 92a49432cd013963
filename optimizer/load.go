package optimizer

import (
	"context"
	"fmt"
	"path/filepath"

	"rulebook/onnx"
	"rulebook/runtime"
	"rulebook/verify"
	"rulebook/version"
)

// LoadRules loads the version ref names (version.Open: a bundle, FILE:TAG,
// or a tag or hash prefix of the database at dbPath) and evaluates each
// rule again. A hash shows only that the rules are what whoever wrote the
// hash wrote, so no rule rewrites a model untested.
func LoadRules(ctx context.Context, dbPath, ref string) (*version.Set, error) {
	rs, err := version.Open(ctx, dbPath, ref)
	if err != nil {
		return nil, err
	}
	if err := verify.Recheck(ctx, rs.Rules, rs.Texts); err != nil {
		return nil, fmt.Errorf("--rules %s: %w; refusing the whole version", ref, err)
	}
	return rs, nil
}

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

// Command embedweights writes a copy of an ONNX model whose external weights
// are replaced, inline, by the ones rulebook's runtime generates when the
// weights file is absent (runtime.EmbedRandomWeights). ONNX Runtime can then
// be timed on the same model and weights. docs/runtime.md ("Generated
// weights") tells how the weights are made. Usage:
//
//	go run ./scripts/embedweights IN.onnx OUT.onnx [SEED]
package main

import (
	"fmt"
	"os"
	"strconv"

	"rulebook/onnx"
	"rulebook/runtime"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "embedweights:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 || len(args) > 3 {
		return fmt.Errorf("usage: embedweights IN.onnx OUT.onnx [SEED]")
	}
	seed := uint64(1) // rulebook run's default --seed
	if len(args) == 3 {
		s, err := strconv.ParseUint(args[2], 10, 64)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		seed = s
	}
	m, err := onnx.ReadModel(args[0])
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := runtime.EmbedRandomWeights(m, seed); err != nil {
		return fmt.Errorf("embed: %w", err)
	}
	if err := onnx.WriteModel(args[1], m); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rulebook/internal/checked"
	"rulebook/plan"
	"rulebook/version"
)

func newPlanCmd() *cobra.Command {
	var req plan.Request
	var memGiB, bucketMiB float64
	var emit, ref, attention string
	var explain bool
	cmd := &cobra.Command{
		Use:   "plan MODEL.onnx|mlp|bert-large|dlrm",
		Short: "Price data, tensor, grid and pipeline parallel training plans in a simulator",
		Long:  help("plan"),
		Example: `  rulebook plan bert-large --machine summit:1 --batch 48
  rulebook plan mlp --machine summit:4 --batch 1536 --strategy grid -o mlp-plan.json
  rulebook plan ../shared/models/resnet50.onnx --machine dgx-a100:2 --batch 8 --per-device
  rulebook plan bert-large --machine summit:1 --batch 6 --memory-limit 6 --strategy grid -o bert.json --emit torch
  rulebook plan mlp --machine h200:1x1 --batch 256 --precision fp32 --explain`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Batch < 0 || req.Microbatches < 0 {
				return fmt.Errorf("--batch and --microbatches must not be negative")
			}
			if err := checked.Real("--memory-limit", memGiB, 0, 1<<20); err != nil {
				return err
			}
			if err := checked.Real("--bucket-mb", bucketMiB, 0, 1<<20); err != nil {
				return err
			}
			req.BucketBytes = bucketMiB * (1 << 20)
			if emit != "" && emit != "torch" {
				return fmt.Errorf("--emit: unknown engine %q (known: torch)", emit)
			}
			a, err := plan.ParseAttention(attention)
			if err != nil {
				return fmt.Errorf("--attention: %w", err)
			}
			req.Attention = a
			req.Model, req.MemoryLimit, req.EmitTorch = args[0], memGiB*(1<<30), emit == "torch"
			if ref != "" {
				if req.Rules, err = version.Open(cmd.Context(), dbPath(cmd), ref); err != nil {
					return fmt.Errorf("--rules: %w", err)
				}
			}
			out, err := plan.Run(cmd.Context(), req)
			if out != nil {
				// the comparison is printed even when its files could
				// not be written (a pipeline plan has no DTensor form)
				if werr := out.Choice.WriteTable(cmd.OutOrStdout()); werr != nil && err == nil {
					err = werr
				}
				if explain {
					if werr := out.Choice.WriteExplain(cmd.OutOrStdout(), out.Graph); werr != nil && err == nil {
						err = werr
					}
				}
			}
			if err != nil {
				return err
			}
			for _, p := range out.Written {
				fmt.Fprintln(cmd.OutOrStdout(), "wrote", p)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Machine, "machine", "summit:1", "machine preset with node count (summit:16, dgx-a100:2, h100:1, cpu), part of a node (h100:1x2), or a machine JSON file")
	f.Int64Var(&req.Batch, "batch", 0, "global batch (0: the model's own fixed batch)")
	f.BoolVar(&req.PerDevice, "per-device", false, "--batch is per device: the global batch is it times the machine's devices")
	f.StringVar(&req.Strategy, "strategy", "", "price only dp, tp, grid, pp or emb (default: all, and choose)")
	f.Float64Var(&memGiB, "memory-limit", 0, "usable memory per device in GiB (default: the device's capacity)")
	f.IntVar(&req.Microbatches, "microbatches", 0, "micro-batches per pipeline step (default: twice the stages)")
	f.Float64Var(&bucketMiB, "bucket-mb", plan.DefaultBucketBytes>>20, "data-parallel gradient bucket in MiB, as PyTorch DDP's bucket_cap_mb (0: one all-reduce per weight)")
	f.StringVarP(&req.Out, "output", "o", "", "write the chosen plan here (with .trace.json and .sharded.onnx beside it)")
	f.StringVar(&ref, "rules", "", "a rule version to name in the plan (tag, hash prefix or bundle); not used by the strategies yet")
	f.StringVar(&attention, "attention", "fused", "price attention as one fused kernel (fused: no scores kept for backward) or as the graph writes it (unfused)")
	f.StringVar(&emit, "emit", "", "also write the plan for an engine: torch (a DTensor plan)")
	f.StringVar(&req.Precision, "precision", "", "bf16, fp16, tf32 or fp32 (default: the device's best 16-bit mixed precision, bf16, or fp16 on a V100)")
	f.StringVar(&req.Profile, "profile", "", "a device profile of measured operator times (CSV; default: the preset's shipped one, for h200; none: the roofline alone)")
	f.StringVar(&req.Optimizer, "optimizer", "", "Adam as torch.optim.Adam runs it: fused (fused=True) or foreach (default: foreach, torch.optim.Adam's own default)")
	f.BoolVar(&explain, "explain", false, "also print each operator's simulated forward, backward and host launches and what priced them (profile, fit or roofline)")
	return cmd
}

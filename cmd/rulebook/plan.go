package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rulebook/plan"
	"rulebook/version"
)

func newPlanCmd() *cobra.Command {
	var req plan.Request
	var memGiB, bucketMiB float64
	ref, explain := "", false
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
			req.Model, req.MemoryLimit, req.BucketBytes = args[0], memGiB*(1<<30), bucketMiB*(1<<20)
			var err error
			if ref != "" {
				if req.Rules, err = version.Open(cmd.Context(), dbPath(cmd), ref); err != nil {
					return fmt.Errorf("--rules: %w", err)
				}
			}
			out, err := plan.Run(cmd.Context(), req)
			if out != nil {
				// printed even when no file could be written (a pipeline has no DTensor form)
				if werr := out.WriteText(cmd.OutOrStdout(), explain, err == nil); err == nil {
					err = werr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Machine, "machine", "summit:1", "machine preset with node count (summit:16, dgx-a100:2, h100:1, cpu), part of a node (h100:1x2), or a machine JSON file")
	f.Int64Var(&req.Batch, "batch", 0, "global batch (0: the model's own fixed batch)")
	f.BoolVar(&req.PerDevice, "per-device", false, "--batch is per device: the global batch is it times the machine's devices")
	f.StringVar(&req.Strategy, "strategy", "", "price only dp, tp, grid, pp, emb or joint (default: all, and choose; joint needs --rules)")
	f.Float64Var(&memGiB, "memory-limit", 0, "usable memory per device in GiB (default: the device's capacity)")
	f.IntVar(&req.Microbatches, "microbatches", 0, "micro-batches per pipeline step (default: twice the stages)")
	f.Float64Var(&bucketMiB, "bucket-mb", plan.DefaultBucketBytes>>20, "data-parallel gradient bucket in MiB, as PyTorch DDP's bucket_cap_mb (0: one all-reduce per weight)")
	f.StringVarP(&req.Out, "output", "o", "", "write the chosen plan here (with .trace.json and .sharded.onnx beside it)")
	f.StringVar(&ref, "rules", "", "a released rule version (tag, hash prefix or bundle) whose parallel rules the joint search applies")
	f.StringVar(&req.Attention, "attention", "fused", "price attention as one fused kernel (fused: no scores kept for backward) or as the graph writes it (unfused)")
	f.StringVar(&req.Emit, "emit", "", "also write the plan for an engine: torch (a DTensor plan)")
	f.StringVar(&req.Precision, "precision", "", "bf16, fp16, tf32 or fp32 (default: the device's best 16-bit mixed precision, bf16, or fp16 on a V100)")
	f.StringVar(&req.Profile, "profile", "", "a device profile of measured operator times (CSV; default: the preset's shipped one, for h200; none: the roofline alone)")
	f.StringVar(&req.Levers, "levers", "all", "memory levers a plan that does not fit may pull: accum, zero, recompute (comma-separated), all or none")
	f.StringVar(&req.Optimizer, "optimizer", "", "Adam as torch.optim.Adam runs it: fused (fused=True) or foreach (default: foreach, torch.optim.Adam's own default)")
	f.BoolVar(&req.Pareto, "pareto", false, "also price every memory lever of every strategy and print the time/memory frontier (with -o, also NAME.pareto.csv and .svg)")
	f.BoolVar(&explain, "explain", false, "also print each operator's simulated forward, backward and host launches and what priced them (profile, fit or roofline)")
	return cmd
}

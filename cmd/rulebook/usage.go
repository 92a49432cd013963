package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"rulebook/store"
)

func newUsageCmd() *cobra.Command {
	var ref, format string
	cmd := &cobra.Command{
		Use:   "usage [--version TAG|HASH] [--format text|csv|json]",
		Short: "Show how often each rule was applied across optimized models (heat map)",
		Long:  help("usage"),
		Example: `  rulebook optimize ../shared/models/squeezenet1_1.onnx --rules v1 -o squeezenet1_1.opt.onnx
  rulebook usage
  rulebook usage --version v1 --format csv`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if !slices.Contains(store.UsageFormats, format) {
				return fmt.Errorf("--format must be text, csv or json, got %q", format)
			}
			return nil
		},
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			return runUsage(cmd, db, ref, format)
		}),
	}
	cmd.Flags().StringVar(&ref, "version", "", "only optimizations with this version (tag or hash prefix)")
	cmd.Flags().StringVar(&format, "format", "text", "text, csv or json")
	return cmd
}

func runUsage(cmd *cobra.Command, db *store.Store, ref, format string) error {
	hash, err := versionHash(cmd.Context(), db, ref)
	if err != nil {
		return err
	}
	uses, err := db.Usage(cmd.Context(), hash)
	if err != nil {
		return err
	}
	if len(uses) == 0 && format == "text" {
		_, err := fmt.Fprintln(cmd.OutOrStdout(), noUsageMessage(db.Path(), ref))
		return err
	}
	return store.WriteUsage(cmd.OutOrStdout(), uses, format)
}

// versionHash resolves --version as the other version commands do; "" keeps
// every version.
func versionHash(ctx context.Context, db *store.Store, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	v, _, err := db.LoadVersion(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("--version: %w", err)
	}
	return v.Hash, nil
}

func noUsageMessage(path, ref string) string {
	if ref != "" {
		return fmt.Sprintf("no optimizations with version %s recorded in %s; run 'rulebook optimize ... --rules %s --db %s' first", ref, path, ref, path)
	}
	return fmt.Sprintf("no optimizations recorded in %s; run 'rulebook optimize ... --db %s' first", path, path)
}

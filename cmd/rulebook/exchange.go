package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"rulebook/exchange"
	"rulebook/rules"
	"rulebook/store"
)

func newExportCmd() *cobra.Command {
	var tag, format, output string
	cmd := &cobra.Command{
		Use:   "export --version TAG",
		Short: "Write a released version's rules as json, sexpr or dot",
		Long: `export loads a version (by tag or hash prefix), re-checking its hash, and
writes its rules: json (rulebook's exchange format, with shapes), sexpr (one
canonical rule per line) or dot (Graphviz, one cluster per rule).`,
		Example: "  rulebook export --version v1 --format json -o v1.json",
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if tag == "" {
				return fmt.Errorf("--version is required (see 'rulebook versions')")
			}
			if format != "json" && format != "sexpr" && format != "dot" {
				return fmt.Errorf("--format must be json, sexpr or dot, got %q", format)
			}
			return nil
		},
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			v, rs, err := db.VersionRules(cmd.Context(), tag)
			if err != nil {
				return err
			}
			out := make([]exchange.Rule, len(rs))
			for i, r := range rs {
				out[i] = exchange.Rule{Src: r.Src, Dst: r.Dst, Inputs: r.Inputs, Constants: r.Constants}
			}
			return writeOutput(cmd, output, func(w io.Writer) error {
				h := exchange.Header{Version: v.Tag, Hash: v.Hash}
				switch format {
				case "json":
					return exchange.WriteJSON(w, h, out)
				case "sexpr":
					return exchange.WriteSexpr(w, h, out)
				}
				return exchange.WriteDot(w, rules.Default(), out)
			})
		}),
	}
	cmd.Flags().StringVar(&tag, "version", "", "version tag or hash prefix")
	cmd.Flags().StringVar(&format, "format", "json", "json, sexpr or dot")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (default standard output)")
	return cmd
}

// writeOutput writes to standard output, or to a file that appears only
// once it is complete.
func writeOutput(cmd *cobra.Command, path string, write func(io.Writer) error) error {
	if path == "" {
		return write(cmd.OutOrStdout())
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rulebook-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func newImportCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "import --format json|sexpr FILE",
		Short: "Add the rules of a file to the store as candidates",
		Long: `import reads rules exported by rulebook (json or sexpr), checks that every
rule parses, and adds them in one transaction as candidates of an "import"
run that records the file. A bad file is reported with its position and
nothing is written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(cmd.Context(), cmd, format, args[0])
		},
	}
	cmd.Flags().StringVar(&format, "format", "json", "json or sexpr")
	return cmd
}

func runImport(ctx context.Context, cmd *cobra.Command, format, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	reg := rules.Default()
	var in []exchange.Rule
	switch format {
	case "json":
		_, in, err = exchange.ReadJSON(path, data)
	case "sexpr":
		in, err = exchange.ReadSexpr(path, data, reg)
	default:
		return fmt.Errorf("--format must be json or sexpr, got %q", format)
	}
	if err != nil {
		return err
	}
	parsed := make([]store.Rule, len(in))
	for i, r := range in {
		canon, text, err := exchange.Parse(reg, r)
		if err != nil {
			return fmt.Errorf("%s: rule %d: %w", path, i+1, err)
		}
		ops := append(canon.Src.OpNames(), canon.Dst.OpNames()...)
		parsed[i] = store.Rule{Hash: text.Hash(), Src: text.Src, Dst: text.Dst, Inputs: text.Inputs, Constants: text.Constants,
			SrcOps: len(canon.Src.Nodes), DstOps: len(canon.Dst.Nodes), NumInputs: canon.NumInputs, NumOutputs: len(canon.Src.Outputs),
			Operators: uniqueSorted(ops), Status: "candidate"}
	}
	db, err := store.Open(ctx, dbPath(cmd))
	if err != nil {
		return err
	}
	defer db.Close()
	config, _ := json.Marshal(map[string]any{"file": path, "format": format, "rules": len(parsed)})
	runID, err := db.BeginRun(ctx, "import", string(config), 0, version)
	if err != nil {
		return err
	}
	for i := range parsed {
		parsed[i].RunID = runID
	}
	n, err := db.InsertRules(ctx, parsed)
	run := store.Run{ID: runID, Status: "done", Candidates: int64(len(parsed)), Stored: n}
	if err != nil {
		run.Status = endStatus(err)
	}
	if ferr := db.FinishRun(context.WithoutCancel(ctx), run); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "imported %d rules from %s: %d new (run %d)\n", len(parsed), path, n, runID)
	return nil
}

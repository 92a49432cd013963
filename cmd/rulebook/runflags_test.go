package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/runtime/backend"
)

// TestRunFlagsRefused: a --dim that names no symbolic dimension of the
// model (squeezenet has none), and a --threads out of range, are refused
// by run and optimize, not silently ignored.
func TestRunFlagsRefused(t *testing.T) {
	model := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		dim  bool
		want string
	}{
		{[]string{"run", model, "--dim", "N=1073741824", "--repeat", "1"}, true, ""},
		{[]string{"run", model, "--dim", "x=1", "--repeat", "1"}, true, ""},
		{[]string{"optimize", model, "--rules", "../../optimizer/testdata/rules-3ops.json", "--dim", "N=2", "-o", dir + "/o.onnx"}, true, ""},
		{[]string{"run", model, "--threads", "-1"}, false, "--threads -1"},
		{[]string{"run", model, "--threads", "1000000"}, false, "--threads 1000000"},
	} {
		_, err := run(context.Background(), append(c.args, "--db", dir+"/none.db")...)
		if c.dim && !errors.Is(err, backend.ErrUnusedDim) || !c.dim && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

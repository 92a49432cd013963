package cuda

import (
	"errors"
	"testing"
)

// TestProbe runs everywhere: on a machine without CUDA it must report
// ErrUnavailable with a reason, never panic.
func TestProbe(t *testing.T) {
	d, err := Probe()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Probe failed without ErrUnavailable: %v", err)
		}
		t.Skipf("no GPU here: %v", err)
	}
	if d.Name == "" || d.Major == 0 || d.Memory == 0 {
		t.Errorf("incomplete device description: %+v", d)
	}
	t.Logf("GPU: %s", d)
}

func TestMissingLibraryIsExplained(t *testing.T) {
	_, tried, err := openFirst([]string{"libdoes-not-exist.so.7"})
	if err == nil || len(tried) != 1 {
		t.Fatalf("opening a missing library: %v %v", tried, err)
	}
}

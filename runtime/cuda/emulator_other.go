//go:build !(linux || darwin || freebsd || netbsd)

package cuda

import "fmt"

// Emulator runs the kernel sources on the CPU; it needs a Unix system.
type Emulator struct{ Backend }

// OpenEmulator fails: the emulator maps memory and threads the Unix way.
func OpenEmulator(dir string) (*Emulator, error) {
	return nil, fmt.Errorf("%w: the kernel emulator needs a Unix system", ErrUnavailable)
}

// Allocations reports the live allocations.
func (e *Emulator) Allocations() int { return 0 }

//go:build race

package gemm

// raceEnabled: the race detector allocates on its own account,
// so allocation counts are meaningless.
const raceEnabled = true

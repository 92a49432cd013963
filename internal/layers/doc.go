// Package layers checks that the import layers docs/design.md states are
// the ones the code has. The table in docs/design.md ("Import layers") is
// the contract, and this package's test keeps the two from drifting apart.
// It has no code of its own.
package layers

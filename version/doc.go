// Package version loads a released version of the rules. It reads one from
// the store by tag or hash prefix, from another database as FILE:TAG, or
// from a bundle exported with 'rulebook export --format json'. Every load
// parses with every operator the store knows (Registry), and refuses rules
// that no longer hash to the version's content hash. The optimizer, compare
// and the planner all load versions through it. docs/design.md ("Data
// flow", steps 5 and 6) tells the long story.
package version

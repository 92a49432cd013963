// Package optimizer rewrites ONNX models with one pinned, hash-checked
// version of the rules (TASO §2.7) and writes the cheaper model back. A
// model becomes a Graph in the registry's terms. Optimize runs TASO's
// cost-based search over it, a CostModel prices each graph, and ToONNX
// lowers the best one back. The rules come from one version.Set, loaded
// and hash-checked by package version. Job runs all of it for one model
// file, as 'rulebook optimize' does. docs/optimizer.md tells the long story.
package optimizer

package cuda

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Source is one CUDA C translation unit of kernels: one per operator
// family. Kernels are declared `extern "C" __global__ void name(...)`, so
// their names are not mangled, and take parameters of the kinds Args
// passes: pointers, long long, int, float and Shape8.
type Source struct {
	// Name names the family, e.g. "elementwise"; it is the NVRTC program
	// name and the emulator's file name.
	Name string
	// Code is the complete text (the shared prelude included).
	Code string

	once  sync.Once
	decls map[string]*KernelDecl
	err   error
}

// KernelDecl is a kernel as declared in a source.
type KernelDecl struct {
	Name   string
	Params []Param
	Body   string
	// Syncs says the body has __shared__ arrays or calls __syncthreads
	// (directly; helpers that synchronise need a __shared__ array from
	// the kernel): its threads must run together.
	Syncs bool
}

// Param is one kernel parameter.
type Param struct {
	Type string // normalised C type, e.g. "const float*"
	Name string
	Kind Kind
}

// Kernels parses the source's kernel declarations (once).
func (s *Source) Kernels() (map[string]*KernelDecl, error) {
	s.once.Do(func() { s.decls, s.err = parseKernels(s.Code) })
	if s.err != nil {
		return nil, fmt.Errorf("cuda: source %s: %w", s.Name, s.err)
	}
	return s.decls, nil
}

// Kernel returns one kernel's declaration.
func (s *Source) Kernel(name string) (*KernelDecl, error) {
	decls, err := s.Kernels()
	if err != nil {
		return nil, err
	}
	d, ok := decls[name]
	if !ok {
		return nil, fmt.Errorf("cuda: source %s has no kernel %q", s.Name, name)
	}
	return d, nil
}

const kernelMarker = `extern "C" __global__ void `

// parseKernels finds every kernel definition: the marker, a name, a
// parameter list, and a body whose braces balance.
func parseKernels(code string) (map[string]*KernelDecl, error) {
	if err := checkBalanced(code); err != nil {
		return nil, err
	}
	decls := map[string]*KernelDecl{}
	rest := code
	for {
		i := strings.Index(rest, kernelMarker)
		if i < 0 {
			break
		}
		rest = rest[i+len(kernelMarker):]
		open := strings.IndexByte(rest, '(')
		if open < 0 {
			return nil, fmt.Errorf("kernel without a parameter list after %q", truncate(rest, 40))
		}
		name := strings.TrimSpace(rest[:open])
		if !isIdent(name) {
			return nil, fmt.Errorf("kernel name %q is not an identifier", name)
		}
		closing := strings.IndexByte(rest[open:], ')')
		if closing < 0 {
			return nil, fmt.Errorf("kernel %s: unterminated parameter list", name)
		}
		params, err := parseParams(rest[open+1 : open+closing])
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", name, err)
		}
		after := rest[open+closing+1:]
		brace := strings.IndexByte(after, '{')
		if brace < 0 || strings.TrimSpace(after[:brace]) != "" {
			return nil, fmt.Errorf("kernel %s: no body after the parameter list", name)
		}
		end, err := matchBrace(after, brace)
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", name, err)
		}
		body := after[brace : end+1]
		if _, dup := decls[name]; dup {
			return nil, fmt.Errorf("kernel %s is defined twice", name)
		}
		decls[name] = &KernelDecl{Name: name, Params: params, Body: body, Syncs: strings.Contains(body, "__syncthreads") || strings.Contains(body, "__shared__")}
		rest = after[end+1:]
	}
	if len(decls) == 0 {
		return nil, fmt.Errorf("no kernels (%q definitions)", strings.TrimSpace(kernelMarker))
	}
	return decls, nil
}

// paramKinds maps the normalised parameter types the kernels may use to
// the kinds Go passes.
var paramKinds = map[string]Kind{
	"const float*":     KindPtr,
	"float*":           KindPtr,
	"const long long*": KindPtr,
	"long long":        KindI64,
	"int":              KindI32,
	"float":            KindF32,
	"Shape8":           KindShape8,
}

func parseParams(list string) ([]Param, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "void" {
		return nil, nil
	}
	var params []Param
	for _, raw := range strings.Split(list, ",") {
		p := strings.ReplaceAll(raw, "__restrict__", "")
		p = strings.ReplaceAll(p, "*", " * ")
		fields := strings.Fields(p)
		if len(fields) < 2 || !isIdent(fields[len(fields)-1]) {
			return nil, fmt.Errorf("parameter %q has no type and name", strings.TrimSpace(raw))
		}
		name := fields[len(fields)-1]
		typ := strings.ReplaceAll(strings.Join(fields[:len(fields)-1], " "), " *", "*")
		kind, ok := paramKinds[typ]
		if !ok {
			return nil, fmt.Errorf("parameter %s has type %q, which Args cannot pass", name, typ)
		}
		params = append(params, Param{Type: typ, Name: name, Kind: kind})
	}
	return params, nil
}

// checkBalanced checks that braces, parentheses and brackets nest, outside
// comments and string and character literals.
func checkBalanced(code string) error {
	var stack []byte
	line := 1
	pairs := map[byte]byte{')': '(', ']': '[', '}': '{'}
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == '\n':
			line++
		case strings.HasPrefix(code[i:], "//"):
			for i < len(code) && code[i] != '\n' {
				i++
			}
			line++
		case strings.HasPrefix(code[i:], "/*"):
			end := strings.Index(code[i+2:], "*/")
			if end < 0 {
				return fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(code[i:i+2+end], "\n")
			i += end + 3
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(code) && code[j] != c {
				if code[j] == '\\' {
					j++
				}
				if j < len(code) && code[j] == '\n' {
					return fmt.Errorf("line %d: unterminated literal", line)
				}
				j++
			}
			if j >= len(code) {
				return fmt.Errorf("line %d: unterminated literal", line)
			}
			i = j
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, c)
		case c == ')' || c == ']' || c == '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return fmt.Errorf("line %d: unbalanced %q", line, c)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("%d unclosed %q at the end", len(stack), stack)
	}
	return nil
}

// matchBrace returns the index of the brace closing the one at open,
// skipping line comments. Kernel bodies hold no braces in block comments
// or literals.
func matchBrace(s string, open int) (int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		if strings.HasPrefix(s[i:], "//") {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated body")
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

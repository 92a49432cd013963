// Package profile reads and writes device profiles: the measured forward
// and backward times of the operators a training step is made of, per
// shape and precision, as ../shared/devices/h200-torch2.11-ops.csv holds
// them and `rulebook profile` measures them. The planner's cost model
// prices an operator from its profile where it can (docs/planner.md,
// "Cost model"; "Measuring your own hardware" for rulebook profile).
//
// A profile is CSV with the header op,shape,mode,fwd_ms,bwd_ms,fwd_gflop,
// fwd_mb. Lines starting with # are comments; "# device: NAME" names the
// device it was measured on. Every line is checked when the file is read,
// and an error names the file and line.
package profile

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"rulebook/cluster"
	"rulebook/internal/infile"
)

// Header is a profile's first line that is not a comment.
const Header = "op,shape,mode,fwd_ms,bwd_ms,fwd_gflop,fwd_mb"

// Entry is one measured operator.
type Entry struct {
	Kind      Kind
	Shape     Shape
	Precision cluster.Precision
	// ForwardMS and BackwardMS are milliseconds, as the file writes them
	// (kept so, that a profile round-trips exactly); BackwardMS is the
	// backward pass alone (the gradients of every floating input, weights
	// included).
	ForwardMS, BackwardMS float64
	// GFLOP and MB are the forward's arithmetic and the least bytes it
	// moves, for working out achieved rates.
	GFLOP, MB float64
	Line      int // where it was read; 0 if it was built in memory
}

// Forward is the forward's measured time in seconds.
func (e Entry) Forward() float64 { return e.ForwardMS / 1e3 }

// Backward is the backward's measured time in seconds.
func (e Entry) Backward() float64 { return e.BackwardMS / 1e3 }

// Profile is a device's measured operators.
type Profile struct {
	Name    string // the file it was read from
	Device  string // from a "# device:" comment; may be empty
	Entries []Entry
	index   map[key]int
}

type key struct {
	kind      Kind
	shape     string
	precision cluster.Precision
}

// Error is a bad line of a profile.
type Error struct {
	Path string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg) }

// Load reads and checks a profile file.
func Load(path string) (*Profile, error) {
	data, err := infile.ReadFile(path, infile.Profile)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a profile's text; name is used in errors.
func Parse(name string, data []byte) (*Profile, error) {
	p := &Profile{Name: name, index: map[key]int{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line, header := 0, false
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "":
		case strings.HasPrefix(text, "#"):
			if dev, ok := strings.CutPrefix(text, "# device:"); ok {
				p.Device = strings.TrimSpace(dev)
			}
		case !header:
			if text != Header {
				return nil, &Error{name, line, fmt.Sprintf("expected the header %q, got %q", Header, text)}
			}
			header = true
		default:
			e, err := parseEntry(text)
			if err != nil {
				return nil, &Error{name, line, err.Error()}
			}
			e.Line = line
			if err := p.Add(e); err != nil {
				return nil, &Error{name, line, err.Error()}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !header {
		return nil, &Error{name, max(line, 1), fmt.Sprintf("expected the header %q; the file has none", Header)}
	}
	return p, nil
}

// Add appends an entry, refusing a second one for the same operator,
// shape and precision.
func (p *Profile) Add(e Entry) error {
	if p.index == nil {
		p.index = map[key]int{}
	}
	k := key{e.Kind, e.Shape.String(), e.Precision}
	if i, dup := p.index[k]; dup {
		return fmt.Errorf("%s %s %s is measured twice (first on line %d)", e.Kind, e.Shape, e.Precision, p.Entries[i].Line)
	}
	p.index[k] = len(p.Entries)
	p.Entries = append(p.Entries, e)
	return nil
}

// Find is the entry measured for exactly this operator, shape and
// precision.
func (p *Profile) Find(k Kind, s Shape, prec cluster.Precision) (Entry, bool) {
	i, ok := p.index[key{k, s.String(), prec}]
	if !ok {
		return Entry{}, false
	}
	return p.Entries[i], true
}

// Of lists the entries of one operator kind in one precision, in file
// order: the points a fit is drawn through.
func (p *Profile) Of(k Kind, prec cluster.Precision) []Entry {
	var out []Entry
	for _, e := range p.Entries {
		if e.Kind == k && e.Precision == prec {
			out = append(out, e)
		}
	}
	return out
}

// Precisions lists the precisions the profile measured, in
// cluster.Precisions' order.
func (p *Profile) Precisions() []cluster.Precision {
	var out []cluster.Precision
	for _, prec := range cluster.Precisions {
		if slices.ContainsFunc(p.Entries, func(e Entry) bool { return e.Precision == prec }) {
			out = append(out, prec)
		}
	}
	return out
}

// PrecisionList names the precisions measured, for messages: "bf16 and
// fp32".
func (p *Profile) PrecisionList() string {
	var names []string
	for _, prec := range p.Precisions() {
		names = append(names, string(prec))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// CheckPrecisions refuses a profile holding a precision the device has no
// peak for (has reports whether it has one), naming the first such line.
func (p *Profile) CheckPrecisions(device string, has func(cluster.Precision) bool) error {
	for _, e := range p.Entries {
		if !has(e.Precision) {
			return &Error{p.Name, e.Line, fmt.Sprintf("precision %s, which the %s has no peak for", e.Precision, device)}
		}
	}
	return nil
}

func parseEntry(text string) (Entry, error) {
	f := strings.Split(text, ",")
	if len(f) != 7 {
		return Entry{}, fmt.Errorf("expected 7 fields (%s), got %d", Header, len(f))
	}
	kind, err := ParseKind(f[0])
	if err != nil {
		return Entry{}, err
	}
	shape, err := ParseShape(kind, f[1])
	if err != nil {
		return Entry{}, err
	}
	prec, err := cluster.ParsePrecision(f[2])
	if err != nil {
		return Entry{}, fmt.Errorf("mode: %w", err)
	}
	e := Entry{Kind: kind, Shape: shape, Precision: prec}
	numbers := []struct {
		name     string
		text     string
		to       *float64
		positive bool
	}{
		{"fwd_ms", f[3], &e.ForwardMS, true},
		{"bwd_ms", f[4], &e.BackwardMS, false},
		{"fwd_gflop", f[5], &e.GFLOP, false},
		{"fwd_mb", f[6], &e.MB, false},
	}
	for _, n := range numbers {
		v, err := number(n.name, n.text, n.positive)
		if err != nil {
			return Entry{}, err
		}
		*n.to = v
	}
	return e, nil
}

// maxNumber bounds a time in ms, GFLOP or MB: a day, or an exabyte.
const maxNumber = 1e11

func number(name, text string, positive bool) (float64, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return 0, fmt.Errorf("%s is missing", name)
	}
	v, err := strconv.ParseFloat(text, 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("%s %q is not a number", name, text)
	case v < 0:
		return 0, fmt.Errorf("%s is negative (%s)", name, text)
	case positive && v == 0:
		return 0, fmt.Errorf("%s is zero; a measured time is positive", name)
	case v > maxNumber:
		return 0, fmt.Errorf("%s %s is past the largest accepted, %g", name, text, float64(maxNumber))
	}
	return v, nil
}

// Write writes the profile as CSV, device comment first; Parse reads it
// back to the same entries.
func Write(w io.Writer, p *Profile) error {
	var b strings.Builder
	if p.Device != "" {
		fmt.Fprintf(&b, "# device: %s\n", p.Device)
	}
	b.WriteString(Header + "\n")
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, e := range p.Entries {
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s\n", e.Kind, e.Shape, e.Precision, g(e.ForwardMS), g(e.BackwardMS), g(e.GFLOP), g(e.MB))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

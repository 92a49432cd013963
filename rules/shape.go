package rules

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// MaxRank bounds tensor rank; every operator in the registry works on rank ≤ 4.
const MaxRank = 4

// SplitTree records the concatenation history of one dimension, so that a
// split can undo the most recent concat without a split-point parameter
// (TASO §2.3.1). A nil tree is a leaf: the dimension was never concatenated.
type SplitTree struct {
	Left, Right *SplitTree
	LeftSize    int // extent of the left part along the dimension
}

// Equal reports whether two split trees describe the same history.
func (t *SplitTree) Equal(u *SplitTree) bool {
	if t == nil || u == nil {
		return t == u
	}
	return t.LeftSize == u.LeftSize && t.Left.Equal(u.Left) && t.Right.Equal(u.Right)
}

// AppendEncoding appends a prefix encoding of the tree, for hashing.
func (t *SplitTree) AppendEncoding(b []byte) []byte {
	if t == nil {
		return append(b, 0)
	}
	b = append(b, 1, byte(t.LeftSize), byte(t.LeftSize>>8))
	b = t.Left.AppendEncoding(b)
	return t.Right.AppendEncoding(b)
}

// combineSplit merges the histories of a dimension shared by two operands of
// an element-wise operator: a history survives only if both operands agree.
func combineSplit(a, b *SplitTree) *SplitTree {
	if a.Equal(b) {
		return a
	}
	return nil
}

// Shape is a tensor's dimensions plus the split tree of each dimension,
// and its parallel layout (docs/parallel.md): how many pieces each
// dimension is cut into, and the replica degree split into partial sums and
// identical copies. The zero layout is a tensor on one device, so every
// shape built without one is unpartitioned, and its encoding is unchanged.
type Shape struct {
	Rank  int
	Dims  [MaxRank]int
	Split [MaxRank]*SplitTree
	// Degrees holds the pieces per dimension; 0 means 1.
	Degrees [MaxRank]int
	// Sum is the number of partial sums the pieces hold (0 means 1): the
	// logical value is their sum. Copy is the number of identical copies
	// (0 means 1). The replica degree is Sum × Copy.
	Sum, Copy int
}

// NewShape returns a shape without concat history.
func NewShape(dims ...int) Shape {
	if len(dims) > MaxRank {
		panic(fmt.Sprintf("rank %d exceeds %d", len(dims), MaxRank))
	}
	var s Shape
	s.Rank = len(dims)
	copy(s.Dims[:], dims)
	return s
}

// Size is the number of elements.
func (s Shape) Size() int {
	n := 1
	for i := 0; i < s.Rank; i++ {
		n *= s.Dims[i]
	}
	return n
}

// SameDims reports whether two shapes have equal rank and dimensions,
// ignoring split history but not the parallel layout: pieces of different
// layouts are different values.
func (s Shape) SameDims(t Shape) bool {
	return s.Rank == t.Rank && s.Dims == t.Dims && s.SameLayout(t)
}

// Equal compares dimensions, layout and split history.
func (s Shape) Equal(t Shape) bool {
	if !s.SameDims(t) {
		return false
	}
	for i := 0; i < s.Rank; i++ {
		if !s.Split[i].Equal(t.Split[i]) {
			return false
		}
	}
	return true
}

// DimList returns the dimensions as a slice.
func (s Shape) DimList() []int { return append([]int(nil), s.Dims[:s.Rank]...) }

// String renders dimensions as "2x4"; a scalar is "scalar". A parallel
// layout shows as "12/2x6+sum2+copy3": dimension 0 in 2 pieces, 2 partial
// sums, 3 copies.
func (s Shape) String() string {
	var b strings.Builder
	if s.Rank == 0 {
		b.WriteString("scalar")
	}
	for i := 0; i < s.Rank; i++ {
		if i > 0 {
			b.WriteByte('x')
		}
		fmt.Fprint(&b, s.Dims[i])
		if d := s.Degree(i); d > 1 {
			fmt.Fprintf(&b, "/%d", d)
		}
	}
	if n := s.SumDegree(); n > 1 {
		fmt.Fprintf(&b, "+sum%d", n)
	}
	if n := s.CopyDegree(); n > 1 {
		fmt.Fprintf(&b, "+copy%d", n)
	}
	return b.String()
}

// ParseDims parses "2x4", "scalar" or "12/2x6+sum2+copy3" as produced by
// Shape.String.
func ParseDims(text string) (Shape, error) {
	body, replicas, _ := strings.Cut(text, "+")
	var s Shape
	if body != "scalar" {
		parts := strings.Split(body, "x")
		if len(parts) > MaxRank {
			return Shape{}, fmt.Errorf("shape %q: rank %d exceeds %d", text, len(parts), MaxRank)
		}
		s.Rank = len(parts)
		for i, p := range parts {
			size, degree, cut := strings.Cut(p, "/")
			d, err := positive(size)
			if err != nil {
				return Shape{}, fmt.Errorf("shape %q: dimension %q is not a positive integer", text, p)
			}
			s.Dims[i] = d
			if cut {
				if s.Degrees[i], err = positive(degree); err != nil {
					return Shape{}, fmt.Errorf("shape %q: degree %q is not a positive integer", text, degree)
				}
			}
		}
	}
	if replicas != "" {
		for _, r := range strings.Split(replicas, "+") {
			var err error
			switch {
			case strings.HasPrefix(r, "sum"):
				s.Sum, err = positive(r[3:])
			case strings.HasPrefix(r, "copy"):
				s.Copy, err = positive(r[4:])
			default:
				err = fmt.Errorf("expected sumN or copyN")
			}
			if err != nil {
				return Shape{}, fmt.Errorf("shape %q: replica degree %q: expected sumN or copyN with N a positive integer", text, r)
			}
		}
	}
	s.normalizeLayout()
	if err := s.CheckLayout(); err != nil {
		return Shape{}, fmt.Errorf("shape %q: %w", text, err)
	}
	return s, nil
}

func positive(text string) (int, error) {
	d, err := strconv.Atoi(text)
	if err != nil || d <= 0 || strconv.Itoa(d) != text {
		return 0, fmt.Errorf("%q is not a positive integer", text)
	}
	return d, nil
}

// AppendEncoding appends rank, dims and split trees, and the layout of a
// parallel shape, for hashing.
func (s Shape) AppendEncoding(b []byte) []byte {
	b = append(b, byte(s.Rank))
	for i := 0; i < s.Rank; i++ {
		b = append(b, byte(s.Dims[i]), byte(s.Dims[i]>>8))
		b = s.Split[i].AppendEncoding(b)
	}
	if s.Parallel() {
		// Varints: a degree may exceed a byte (up to MaxDegree, and sums
		// and copies up to MaxPieces).
		b = append(b, 0xff)
		for i := 0; i < s.Rank; i++ {
			b = binary.AppendUvarint(b, uint64(s.Degree(i)))
		}
		b = binary.AppendUvarint(b, uint64(s.SumDegree()))
		b = binary.AppendUvarint(b, uint64(s.CopyDegree()))
	}
	return b
}

// ShapeTable gives each distinct shape (split history included) a small
// id, so searches can compare and cache shapes cheaply. The zero value is
// ready to use; it is not safe for concurrent use.
type ShapeTable struct {
	ids    map[string]int32
	shapes []Shape
}

// Intern returns the id of s, adding it if new.
func (t *ShapeTable) Intern(s Shape) int32 {
	if t.ids == nil {
		t.ids = map[string]int32{}
	}
	key := string(s.AppendEncoding(nil))
	id, ok := t.ids[key]
	if !ok {
		id = int32(len(t.shapes))
		t.ids[key] = id
		t.shapes = append(t.shapes, s)
	}
	return id
}

// Shape returns the shape with the given id.
func (t *ShapeTable) Shape(id int32) Shape { return t.shapes[id] }

// shapeError is a shape rule's complaint, formatted only when read: shape
// searches try thousands of shapes and discard almost every message, and
// formatting them was most of their time.
type shapeError struct {
	format string
	args   []any
	cause  error // a sentinel such as ErrTooManyPieces, or nil
}

func (e *shapeError) Error() string { return fmt.Sprintf(e.format, e.args...) }

func (e *shapeError) Unwrap() error { return e.cause }

func shapeErrorf(format string, args ...any) error { return &shapeError{format: format, args: args} }

// opShapeError names the operator whose shape rule failed.
type opShapeError struct {
	op  string
	err error
}

func (e *opShapeError) Error() string { return e.op + ": " + e.err.Error() }

func (e *opShapeError) Unwrap() error { return e.err }

// nodeShapeError names the node of a graph whose shape rule failed. Like
// shapeError it is formatted only when read: the layout sweep tries
// millions of shapes and reads almost none of the messages.
type nodeShapeError struct {
	node int
	err  error
}

func (e *nodeShapeError) Error() string { return fmt.Sprintf("node %d: %v", e.node, e.err) }

func (e *nodeShapeError) Unwrap() error { return e.err }

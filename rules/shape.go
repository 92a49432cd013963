package rules

import (
	"fmt"
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

// Shape is a tensor's dimensions plus the split tree of each dimension.
type Shape struct {
	Rank  int
	Dims  [MaxRank]int
	Split [MaxRank]*SplitTree
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
// ignoring split history.
func (s Shape) SameDims(t Shape) bool {
	return s.Rank == t.Rank && s.Dims == t.Dims
}

// Equal compares dimensions and split history.
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

// String renders dimensions as "2x4"; a scalar is "scalar".
func (s Shape) String() string {
	if s.Rank == 0 {
		return "scalar"
	}
	parts := make([]string, s.Rank)
	for i := 0; i < s.Rank; i++ {
		parts[i] = fmt.Sprint(s.Dims[i])
	}
	return strings.Join(parts, "x")
}

// ParseDims parses "2x4" or "scalar" as produced by Shape.String.
func ParseDims(text string) (Shape, error) {
	if text == "scalar" {
		return NewShape(), nil
	}
	parts := strings.Split(text, "x")
	if len(parts) > MaxRank {
		return Shape{}, fmt.Errorf("shape %q: rank %d exceeds %d", text, len(parts), MaxRank)
	}
	dims := make([]int, len(parts))
	for i, p := range parts {
		var d int
		if _, err := fmt.Sscanf(p, "%d", &d); err != nil || d <= 0 || fmt.Sprint(d) != p {
			return Shape{}, fmt.Errorf("shape %q: dimension %q is not a positive integer", text, p)
		}
		dims[i] = d
	}
	return NewShape(dims...), nil
}

// AppendEncoding appends rank, dims and split trees, for hashing.
func (s Shape) AppendEncoding(b []byte) []byte {
	b = append(b, byte(s.Rank))
	for i := 0; i < s.Rank; i++ {
		b = append(b, byte(s.Dims[i]), byte(s.Dims[i]>>8))
		b = s.Split[i].AppendEncoding(b)
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
}

func (e *shapeError) Error() string { return fmt.Sprintf(e.format, e.args...) }

func shapeErrorf(format string, args ...any) error { return &shapeError{format: format, args: args} }

// opShapeError names the operator whose shape rule failed.
type opShapeError struct {
	op  string
	err error
}

func (e *opShapeError) Error() string { return e.op + ": " + e.err.Error() }

func (e *opShapeError) Unwrap() error { return e.err }

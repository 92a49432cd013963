package plan

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Plot sizes, in SVG user units: the canvas and the margins around the
// plotting area, wide on the left and bottom for the axis labels.
const (
	plotWidth, plotHeight           = 720.0, 480.0
	marginLeft, marginBottom, inset = 80.0, 60.0, 30.0
)

// WriteFrontierSVG draws the frontier: memory per device across, the
// simulated step down, each plan a labelled dot, joined by the staircase
// that bounds what can be had, with the memory limit as a dashed line.
func WriteFrontierSVG(w io.Writer, ps []Point, limit float64, title string) error {
	if len(ps) == 0 {
		// an empty frontier is an answer too, and the file is written whole
		_, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="13">`+
			`<rect width="100%%" height="100%%" fill="white"/><text x="%g" y="40">%s</text><text x="%g" y="70">no plan fits in the device's memory</text></svg>`+"\n",
			plotWidth, plotHeight, marginLeft, html.EscapeString(title), marginLeft)
		return err
	}
	xs := axis{lo: 0, hi: max(limit, maxOf(ps, func(p Point) float64 { return p.Memory })) * 1.08 / (1 << 30)}
	ys := axis{lo: 0, hi: maxOf(ps, func(p Point) float64 { return p.Step }) * 1.15 * 1e3}
	x := func(bytes float64) float64 {
		return marginLeft + (bytes/(1<<30)-xs.lo)/(xs.hi-xs.lo)*(plotWidth-marginLeft-inset)
	}
	y := func(s float64) float64 {
		return plotHeight - marginBottom - (s*1e3-ys.lo)/(ys.hi-ys.lo)*(plotHeight-marginBottom-inset)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="11">`+"\n", plotWidth, plotHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%g" y="18" font-size="13">%s</text>`+"\n", marginLeft, html.EscapeString(title))
	b.WriteString(xs.ticks(func(v float64) string {
		px := x(v * (1 << 30))
		return fmt.Sprintf(`<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#ddd"/><text x="%.1f" y="%g" text-anchor="middle">%g</text>`,
			px, inset, px, plotHeight-marginBottom, px, plotHeight-marginBottom+16, v)
	}))
	b.WriteString(ys.ticks(func(v float64) string {
		py := y(v / 1e3)
		return fmt.Sprintf(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/><text x="%g" y="%.1f" text-anchor="end">%g</text>`,
			marginLeft, py, plotWidth-inset, py, marginLeft-6, py+4, v)
	}))
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">memory per device (GiB)</text>`+"\n", (marginLeft+plotWidth-inset)/2, plotHeight-18)
	fmt.Fprintf(&b, `<text transform="translate(18 %g) rotate(-90)" text-anchor="middle">step (ms, simulated)</text>`+"\n", (inset+plotHeight-marginBottom)/2)
	lx := x(limit)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#c33" stroke-dasharray="6 4"/><text x="%.1f" y="%g" fill="#c33">memory limit</text>`+"\n",
		lx, inset, lx, plotHeight-marginBottom, lx-4, inset-6)
	var path []string
	for i, p := range ps {
		if i > 0 {
			path = append(path, fmt.Sprintf("%.1f,%.1f", x(p.Memory), y(ps[i-1].Step)))
		}
		path = append(path, fmt.Sprintf("%.1f,%.1f", x(p.Memory), y(p.Step)))
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#36c" stroke-width="1.5"/>`+"\n", strings.Join(path, " "))
	var placed []box
	for _, p := range ps {
		fill := "#36c"
		if !p.Fits {
			fill = "#bbb"
		}
		px, py := x(p.Memory), y(p.Step)
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s: %s, %s</title></circle>`+"\n",
			px, py, fill, html.EscapeString(p.Layout), ms(p.Step), gib(p.Memory))
		if l, ok := label(placed, px, py, p.Layout); ok {
			placed = append(placed, l)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`+"\n", l.textX, l.y1, l.anchor, html.EscapeString(p.Layout))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// box is a placed label: its extent and where its text is anchored.
type box struct {
	x0, y0, x1, y1 float64
	textX          float64
	anchor         string
}

// label places a dot's label where it overlaps no label placed before:
// above right, below right or above left of the dot. A label with no room
// is left out; the dot's tooltip still names the plan.
func label(placed []box, px, py float64, text string) (box, bool) {
	const charWidth, height = 6.2, 11.0
	w := charWidth * float64(len([]rune(text)))
	for _, at := range []struct{ dx, dy float64 }{{6, -6}, {6, 14}, {-6, -6}} {
		l := box{x0: px + at.dx, y1: py + at.dy, textX: px + at.dx, anchor: "start"}
		if at.dx < 0 {
			l.x0, l.anchor = px+at.dx-w, "end"
		}
		l.x1, l.y0 = l.x0+w, l.y1-height
		if !overlaps(placed, l) && l.x0 >= 0 && l.x1 <= plotWidth {
			return l, true
		}
	}
	return box{}, false
}

func overlaps(placed []box, l box) bool {
	for _, o := range placed {
		if l.x0 < o.x1 && o.x0 < l.x1 && l.y0 < o.y1 && o.y0 < l.y1 {
			return true
		}
	}
	return false
}

func maxOf(ps []Point, f func(Point) float64) float64 {
	m := 0.0
	for _, p := range ps {
		m = max(m, f(p))
	}
	return m
}

// axis is a plotted range with round tick marks.
type axis struct{ lo, hi float64 }

// ticks draws about six lines at a round step (1, 2 or 5 times a power of
// ten), each by draw.
func (a axis) ticks(draw func(v float64) string) string {
	raw := (a.hi - a.lo) / 6
	if raw <= 0 || math.IsInf(raw, 0) || math.IsNaN(raw) {
		return ""
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow
	for _, m := range []float64{2, 5, 10} {
		if step >= raw {
			break
		}
		step = m * pow
	}
	var b strings.Builder
	for v := math.Ceil(a.lo/step) * step; v <= a.hi; v += step {
		b.WriteString(draw(math.Round(v/step) * step))
		b.WriteByte('\n')
	}
	return b.String()
}

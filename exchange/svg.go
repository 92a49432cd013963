package exchange

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"

	"rulebook/rules"
)

// ErrNoDot says that Graphviz's dot, which draws SVG, is not on the PATH.
var ErrNoDot = errors.New("dot, Graphviz's drawing tool, is not on the PATH (apt-get install graphviz)")

// WriteSVG draws rules (see WriteDot) into an SVG file with Graphviz's
// dot.
func WriteSVG(path string, reg *rules.Registry, rs []rules.Text) error {
	dot, err := exec.LookPath("dot")
	if err != nil {
		return ErrNoDot
	}
	var src bytes.Buffer
	if err := WriteDot(&src, reg, rs); err != nil {
		return err
	}
	c := exec.Command(dot, "-Tsvg", "-o", path)
	c.Stdin = &src
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("dot: %v: %s", err, out)
	}
	return nil
}

package exchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"rulebook/rules"
)

// ErrNoDot says that Graphviz's dot, which draws pictures, is not on the
// PATH.
var ErrNoDot = errors.New("dot, Graphviz's drawing tool, is not on the PATH (apt-get install graphviz)")

// PictureFormat names the format a picture file's extension asks for:
// svg, png or pdf, drawn by Graphviz's dot, or dot, its source.
func PictureFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png", ".pdf", ".dot":
		return ext[1:], nil
	case "":
		return "", fmt.Errorf("%s: expected a file name ending in .svg, .png, .pdf or .dot, to say the format", path)
	default:
		return "", fmt.Errorf("%s: cannot draw %s; expected a file name ending in .svg, .png, .pdf or .dot", path, ext)
	}
}

// WritePicture draws p into path in the format its extension names (see
// PictureFormat), with Graphviz's dot unless that format is dot itself.
func WritePicture(ctx context.Context, path string, reg *rules.Registry, p Picture) error {
	format, err := PictureFormat(path)
	if err != nil {
		return err
	}
	if format == "dot" {
		return WriteFile(path, func(w io.Writer) error { return WriteDot(w, reg, p) })
	}
	dot, err := exec.LookPath("dot")
	if err != nil {
		return fmt.Errorf("%s: %w; or name a .dot file", path, ErrNoDot)
	}
	var src bytes.Buffer
	if err := WriteDot(&src, reg, p); err != nil {
		return err
	}
	// dot draws onto its standard output, and the picture reaches path
	// through WriteFile, so that only a regular file or a new name is
	// ever written.
	return WriteFile(path, func(w io.Writer) error {
		var errs bytes.Buffer
		c := exec.CommandContext(ctx, dot, "-T"+format)
		c.Stdin, c.Stdout, c.Stderr = &src, w, &errs
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s: dot -T%s: %v: %s", path, format, err, bytes.TrimSpace(errs.Bytes()))
		}
		return nil
	})
}

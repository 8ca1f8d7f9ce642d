package soak

import (
	"fmt"
	"io"
)

// WriteMarkdown renders a long run's report as docs/reliability.md.
func WriteMarkdown(w io.Writer, r *Report) error {
	_, err := fmt.Fprintf(w, "# Reliability\n\n%s", r.Summary())
	return err
}

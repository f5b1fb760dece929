// Package buildlog quotes a compiler's log in an error message, the same
// way for every accelerator backend: the first Lines lines, indented, and
// how many were left out.
package buildlog

import (
	"fmt"
	"strings"
)

// Lines is how many lines of a log an error message quotes.
const Lines = 20

// Append writes "; <what>:" and the first Lines lines of log to b, one per
// indented line, or "; <what> is empty".
func Append(b *strings.Builder, what, log string) {
	log = strings.TrimSpace(log)
	if log == "" {
		fmt.Fprintf(b, "; %s is empty", what)
		return
	}
	lines := strings.Split(log, "\n")
	fmt.Fprintf(b, "; %s:", what)
	for _, l := range lines[:min(len(lines), Lines)] {
		b.WriteString("\n\t")
		b.WriteString(strings.TrimRight(l, "\r"))
	}
	if n := len(lines) - Lines; n > 0 {
		fmt.Fprintf(b, "\n\t... (%d more lines)", n)
	}
}

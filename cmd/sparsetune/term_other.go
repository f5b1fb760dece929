//go:build !linux

package main

import "io"

// isTerminal reports whether w is a terminal; off Linux sparsetune does
// not ask, and progress is one line per step.
func isTerminal(io.Writer) bool { return false }

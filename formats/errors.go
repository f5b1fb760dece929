package formats

import "fmt"

// ParseError reports malformed input. Its message is one line of the form
// "FILE:LINE: what was expected, what was found" for text formats and
// "FILE: offset N: ..." for the binary format.
type ParseError struct {
	File   string // name of the file being read, as given by the caller
	Line   int    // 1-based line number; 0 when Offset is used or unknown
	Offset int64  // byte offset in the (decompressed) binary stream; -1 when unused
	Msg    string // what was expected and what was found
}

func (e *ParseError) Error() string {
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.Offset >= 0:
		return fmt.Sprintf("%s: offset %d: %s", e.File, e.Offset, e.Msg)
	default:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
}

func lineError(file string, line int, format string, args ...any) *ParseError {
	return &ParseError{File: file, Line: line, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

func offsetError(file string, off int64, format string, args ...any) *ParseError {
	return &ParseError{File: file, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func fileError(file string, format string, args ...any) *ParseError {
	return &ParseError{File: file, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

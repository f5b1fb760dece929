package formats

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ReadMTX reads a MatrixMarket coordinate matrix from r as an order-2
// tensor. The name is used in error messages only.
//
// Fields real, integer and pattern (value 1; a third field on a pattern
// line, which some SuiteSparse files have, is ignored) are read; symmetric and
// skew-symmetric matrices are expanded to both triangles (the mirrored entry
// of a skew-symmetric matrix is negated, and its diagonal must be empty), so
// the tensor has SuiteSparse's nnz_full nonzeros. The dims are the declared
// size. complex, hermitian and array matrices are refused.
func ReadMTX(r io.Reader, name string) (*COO, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	line := 0
	next := func() ([]byte, error) {
		text, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, lineError(name, line+1, "expected a line of at most %d bytes", br.Size())
		}
		if len(text) == 0 && err != nil {
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, fileError(name, "read: %v", err)
		}
		line++
		return bytes.TrimRight(text, "\r\n"), nil
	}
	banner, err := next()
	if err == io.EOF {
		return nil, fileError(name, "no nonzeros: expected a %%%%MatrixMarket banner, found an empty file")
	}
	if err != nil {
		return nil, err
	}
	f := strings.Fields(strings.ToLower(string(banner)))
	if len(f) != 5 || f[0] != "%%matrixmarket" || f[1] != "matrix" {
		return nil, lineError(name, 1, "expected the banner %q, found %s", "%%MatrixMarket matrix coordinate real general", quoteField(banner))
	}
	if f[2] != "coordinate" {
		return nil, lineError(name, 1, "expected a coordinate (sparse) matrix, found %s, which sparsetune does not read", quoteField([]byte(f[2])))
	}
	field, sym := f[3], f[4]
	switch field {
	case "real", "integer", "double", "pattern":
	case "complex":
		return nil, lineError(name, 1, "expected a real, integer or pattern field, found complex, which sparsetune does not read")
	default:
		return nil, lineError(name, 1, "expected a real, integer or pattern field, found %s", quoteField([]byte(field)))
	}
	switch sym {
	case "general", "symmetric", "skew-symmetric":
	case "hermitian":
		return nil, lineError(name, 1, "expected general, symmetric or skew-symmetric, found hermitian, which sparsetune does not read")
	default:
		return nil, lineError(name, 1, "expected general, symmetric or skew-symmetric, found %s", quoteField([]byte(sym)))
	}
	if field == "pattern" && sym == "skew-symmetric" {
		// The format's specification allows pattern with general or
		// symmetric only: a skew-symmetric pattern has no values to
		// negate, and reading it as +1 and -1 would invent them.
		return nil, lineError(name, 1, "expected general or symmetric with the pattern field, found skew-symmetric (a pattern has no values to negate)")
	}
	// Comments, then the size line.
	var size []byte
	for {
		size, err = next()
		if err == io.EOF {
			return nil, lineError(name, line+1, "expected the size line \"rows cols nnz\", found the end of the file")
		}
		if err != nil {
			return nil, err
		}
		if t := bytes.TrimSpace(size); len(t) > 0 && t[0] != '%' {
			break
		}
	}
	sf := strings.Fields(string(size))
	if len(sf) != 3 {
		return nil, lineError(name, line, "expected the size line \"rows cols nnz\", found %s", quoteField(size))
	}
	var dim [3]uint64
	for i, s := range sf {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, lineError(name, line, "size line: expected a non-negative integer, found %s", quoteField([]byte(s)))
		}
		dim[i] = v
	}
	if dim[0] == 0 || dim[1] == 0 || dim[0] > MaxDim || dim[1] > MaxDim {
		return nil, lineError(name, line, "size line: expected rows and cols of 1 to %d, found %d x %d", uint64(MaxDim), dim[0], dim[1])
	}
	if dim[2] > MaxNNZ {
		return nil, lineError(name, line, "size line: expected at most %d entries, found %d", uint64(MaxNNZ), dim[2])
	}
	if sym != "general" && dim[0] != dim[1] {
		return nil, lineError(name, line, "expected a square %s matrix, found %d x %d", sym, dim[0], dim[1])
	}
	declared := int(dim[2])
	// Trust the declared count only so far: a short file claiming billions
	// of entries must not allocate for them. Appends grow beyond this.
	capHint := min(declared, 1<<16)
	if sym != "general" {
		capHint *= 2
	}
	t, err := NewCOO([]int{int(dim[0]), int(dim[1])}, capHint)
	if err != nil {
		return nil, lineError(name, line, "%v", err)
	}
	fields := 3
	if field == "pattern" {
		fields = 2
	}
	entries := 0
	for {
		text, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if tt := bytes.TrimSpace(text); len(tt) == 0 || tt[0] == '%' {
			continue
		}
		if entries == declared {
			return nil, lineError(name, line, "expected %d %s (the size line), found more", declared, plural(declared, "entry", "entries"))
		}
		var idx [2]uint32
		pos := 0
		var fv []byte
		for m := range 2 {
			fv, pos = nextField(text, pos)
			i, msg := parseIndex(fv)
			if msg != "" {
				return nil, lineError(name, line, "%s: %s", [2]string{"row", "col"}[m], msg)
			}
			if uint64(i) >= dim[m] {
				return nil, lineError(name, line, "%s: expected an index of at most %d (the size line), found %d", [2]string{"row", "col"}[m], dim[m], uint64(i)+1)
			}
			idx[m] = i
		}
		v := float32(1)
		if field != "pattern" {
			fv, pos = nextField(text, pos)
			var msg string
			if v, msg = parseValue(fv); msg != "" {
				return nil, lineError(name, line, "value: %s", msg)
			}
			if field == "integer" && float64(v) != math.Trunc(float64(v)) {
				return nil, lineError(name, line, "value: expected an integer (the banner says integer), found %s", quoteField(fv))
			}
		}
		if field == "pattern" {
			// Some SuiteSparse pattern files (Pajek/Ragusa16) carry a
			// weight anyway; the banner says the structure is what counts.
			_, pos = nextField(text, pos)
		}
		if extra, _ := nextField(text, pos); len(extra) > 0 {
			article := "a"
			if field == "integer" {
				article = "an"
			}
			return nil, lineError(name, line, "expected %d fields for %s %s matrix, found %d", fields, article, field, countFields(text))
		}
		entries++
		t.Append(idx[:], v)
		if idx[0] == idx[1] {
			if sym == "skew-symmetric" {
				return nil, lineError(name, line, "expected no diagonal entries in a skew-symmetric matrix, found (%d,%d)", idx[0]+1, idx[1]+1)
			}
			continue
		}
		switch sym {
		case "symmetric":
			t.Append([]uint32{idx[1], idx[0]}, v)
		case "skew-symmetric":
			t.Append([]uint32{idx[1], idx[0]}, -v)
		}
	}
	if entries != declared {
		return nil, lineError(name, line+1, "expected %d %s (the size line), found %d before the end of the file", declared, plural(declared, "entry", "entries"), entries)
	}
	if t.NNZ() > MaxNNZ {
		return nil, fileError(name, "expected at most %d nonzeros after symmetric expansion, found %d", uint64(MaxNNZ), t.NNZ())
	}
	return t, nil
}

// WriteMTX writes an order-2 tensor as a MatrixMarket "coordinate real
// general" matrix, values in the shortest form that reads back exactly.
func WriteMTX(w io.Writer, t *COO) error {
	if t.Order() != 2 {
		return fmt.Errorf("MatrixMarket holds matrices: expected an order-2 tensor, found order %d", t.Order())
	}
	if err := t.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintf(bw, "%%%%MatrixMarket matrix coordinate real general\n%% written by sparsetune\n%d %d %d\n", t.Dims[0], t.Dims[1], t.NNZ())
	var b []byte
	for k := range t.NNZ() {
		b = strconv.AppendUint(b[:0], uint64(t.Inds[0][k])+1, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(t.Inds[1][k])+1, 10)
		b = append(b, ' ')
		b = strconv.AppendFloat(b, float64(t.Vals[k]), 'g', -1, 32)
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

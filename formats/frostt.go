package formats

import (
	"bytes"
	"io"
	"strconv"

	"github.com/sparsetune/sparsetune/internal/warm"
)

// FROSTT .tns text: one nonzero per line, the order's 1-based indices then
// the value, separated by spaces or tabs. Blank lines and '#' comments
// (whole lines or line ends) are ignored. Dims are the largest index of each
// mode. The variant written by ParTI! and the B-CSF tools, whose first line
// holds the order and whose second holds the dims, is recognised by a first
// line with a single field; its indices are checked against the declared
// dims, and a tensor without nonzeros is allowed in it.

const tnsBlockSize = 4 << 20

// tnsHeader is what the lines before the nonzeros say.
type tnsHeader struct {
	order int   // 0 until the first data or header line is seen
	dims  []int // declared dims, nil without a header line
}

// tnsChunk is the parse of one block of lines.
type tnsChunk struct {
	inds   [][]uint32
	vals   []float32
	maxIdx []uint32 // largest 0-based index per mode
	err    *ParseError
}

// ReadTNS reads a FROSTT .tns tensor from r. The name is used in error
// messages only.
//
// Lines are parsed in parallel: r is read in blocks of about 4 MiB cut at
// line ends, each worker parses one block into its own arrays, and the
// blocks are joined in order, so memory stays within the result plus a few
// blocks per worker.
func ReadTNS(r io.Reader, name string) (*COO, error) { return readTNS(r, name, nil) }

func readTNS(r io.Reader, name string, pk *picker) (*COO, error) {
	w := workers(1<<30, 1)
	var hdr tnsHeader
	var chunks []*tnsChunk
	var carry []byte
	line := 1 // number of the first line of the next block
	// Blocks start small and double, so a small file costs little.
	size := 64 << 10
	for eof := false; !eof; {
		// Read up to w blocks, then parse them in parallel.
		var blocks [][]byte
		var starts []int
		for len(blocks) < w && !eof {
			buf := make([]byte, len(carry)+size)
			size = min(2*size, tnsBlockSize)
			n := copy(buf, carry)
			m, err := io.ReadFull(r, buf[n:])
			buf = buf[:n+m]
			carry = nil
			switch {
			case err == io.EOF || err == io.ErrUnexpectedEOF:
				eof = true
			case err != nil:
				return nil, fileError(name, "read: %v", err)
			default:
				cut := bytes.LastIndexByte(buf, '\n') + 1
				if cut == 0 { // one line longer than a block: read on
					// The next read is at least as long as what is held,
					// so the buffer doubles and a long line costs linear
					// time.
					carry, size = buf, max(size, len(buf))
					continue
				}
				carry = append([]byte(nil), buf[cut:]...)
				buf = buf[:cut]
			}
			if hdr.order == 0 {
				skip, lines, more, err := readTNSHeader(buf, line, name, &hdr, eof)
				if err != nil {
					return nil, err
				}
				buf, line = buf[skip:], line+lines
				if more { // the order line ends the block: read the dims line
					carry = append(buf[:len(buf):len(buf)], carry...)
					continue
				}
			}
			blocks = append(blocks, buf)
			starts = append(starts, line)
			line += bytes.Count(buf, []byte{'\n'})
		}
		if hdr.order == 0 {
			continue // nothing but blank lines and comments so far
		}
		round := make([]*tnsChunk, len(blocks))
		parallelChunks(len(blocks), len(blocks), func(c, _, _ int) {
			round[c] = parseTNSBlock(blocks[c], starts[c], name, hdr)
		})
		for _, c := range round {
			if c.err != nil {
				return nil, c.err
			}
		}
		// The blocks' text is parsed and no longer needed, and every
		// byte of it has been read here: memory a decision's scratch can
		// take without a page fault (package warm).
		for _, b := range blocks {
			warm.Give(b)
		}
		chunks = append(chunks, round...)
	}
	return joinTNSChunks(chunks, hdr, name, pk)
}

// readTNSHeader looks at the first lines of buf, which starts at line
// number line, for the first non-blank line. A data line sets hdr.order; a
// line with one field is the order of the header variant, and the dims line
// must follow. It returns how many bytes and lines the header took (the
// blank and comment lines before a data line are left to the block parser).
// When buf ends after the order line and more of the file follows (eof is
// false), it reports more, having skipped only the lines before the order
// line, so the caller can read on and call again.
func readTNSHeader(buf []byte, line int, name string, hdr *tnsHeader, eof bool) (skip, lines int, more bool, err error) {
	pos := 0
	for pos < len(buf) {
		text, next := lineAt(buf, pos)
		nf := countFields(text)
		switch {
		case nf == 0:
			pos, lines = next, lines+1
			continue
		case nf > 1:
			hdr.order = nf - 1
			if hdr.order > MaxOrder {
				return 0, 0, false, lineError(name, line+lines, "expected at most %d indices and a value, found %d fields", MaxOrder, nf)
			}
			if hdr.order < MinOrder {
				return 0, 0, false, lineError(name, line+lines, "expected at least %d indices and a value, found %d fields", MinOrder, nf)
			}
			return 0, 0, false, nil
		}
		f, _ := nextField(text, 0)
		order, perr := strconv.Atoi(string(f))
		if perr != nil || order < MinOrder || order > MaxOrder {
			return 0, 0, false, lineError(name, line+lines, "expected %d to %d indices and a value, or a header line with the order (%d to %d), found %s",
				MinOrder, MaxOrder, MinOrder, MaxOrder, quoteField(f))
		}
		orderPos, orderLines := pos, lines
		pos, lines = next, lines+1
		// The dims line follows, after any blank lines and comments.
		for ; pos < len(buf); pos, lines = next, lines+1 {
			text, next = lineAt(buf, pos)
			if countFields(text) == 0 {
				continue
			}
			dims, err := parseDimsLine(text, order, name, line+lines)
			if err != nil {
				return 0, 0, false, err
			}
			hdr.order, hdr.dims = order, dims
			return next, lines + 1, false, nil
		}
		if !eof {
			return orderPos, orderLines, true, nil
		}
		return 0, 0, false, lineError(name, line+lines, "expected the dims line of %d dims after the order line, found the end of the file", order)
	}
	return len(buf), lines, false, nil
}

// parseDimsLine parses the dims line of the header variant.
func parseDimsLine(text []byte, order int, name string, line int) ([]int, error) {
	var dims []int
	for f, pos := nextField(text, 0); len(f) > 0; f, pos = nextField(text, pos) {
		d, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil || d == 0 {
			return nil, lineError(name, line, "expected a positive integer dim, found %s", quoteField(f))
		}
		if d > MaxDim {
			return nil, lineError(name, line, "expected dims of at most %d, found %s", uint64(MaxDim), quoteField(f))
		}
		dims = append(dims, int(d))
	}
	if len(dims) != order {
		return nil, lineError(name, line, "expected %d dims (the order on the line before), found %d", order, len(dims))
	}
	if err := CheckDims(dims); err != nil {
		return nil, lineError(name, line, "%v", err)
	}
	return dims, nil
}

// lineAt returns the line of buf starting at pos, without its newline, and
// the position of the next line.
func lineAt(buf []byte, pos int) ([]byte, int) {
	end := bytes.IndexByte(buf[pos:], '\n')
	if end < 0 {
		return buf[pos:], len(buf)
	}
	return buf[pos : pos+end], pos + end + 1
}

// parseTNSBlock parses the lines of buf, the first of which is line number
// first. It stops at the first bad line.
func parseTNSBlock(buf []byte, first int, name string, hdr tnsHeader) *tnsChunk {
	order := hdr.order
	guess := len(buf) / (4*order + 4) // a short line takes 2 bytes per field
	c := &tnsChunk{inds: make([][]uint32, order), maxIdx: make([]uint32, order)}
	for m := range c.inds {
		c.inds[m] = make([]uint32, 0, guess)
	}
	c.vals = make([]float32, 0, guess)
	var limit [MaxOrder]uint64
	for m := range order {
		limit[m] = MaxDim
		if hdr.dims != nil {
			limit[m] = uint64(hdr.dims[m])
		}
	}
	var idx [MaxOrder]uint32
	line := first
	for pos := 0; pos < len(buf); line++ {
		text, next := lineAt(buf, pos)
		pos = next
		f, fp := nextField(text, 0)
		if len(f) == 0 {
			continue // blank or comment
		}
		for m := 0; m < order; m++ {
			if m > 0 {
				// The common field in one pass; anything else takes the
				// general path below for its message.
				if i, next, ok := scanIndex(text, fp, limit[m]); ok {
					idx[m], fp = i, next
					continue
				}
				f, fp = nextField(text, fp)
			}
			if len(f) == 0 {
				c.err = lineError(name, line, "expected %d indices and a value (%d fields), found %d fields", order, order+1, countFields(text))
				return c
			}
			i, msg := parseIndex(f)
			if msg != "" {
				// A line with the wrong number of fields fails here too;
				// saying so is clearer than naming the misplaced field.
				if nf := countFields(text); nf != order+1 {
					c.err = lineError(name, line, "expected %d indices and a value (%d fields), found %d fields", order, order+1, nf)
				} else {
					c.err = lineError(name, line, "mode %d: %s", m+1, msg)
				}
				return c
			}
			if uint64(i) >= limit[m] {
				c.err = lineError(name, line, "mode %d: expected an index of at most %d (the declared dim), found %d", m+1, limit[m], uint64(i)+1)
				return c
			}
			idx[m] = i
		}
		f, fp = nextField(text, fp)
		if len(f) == 0 {
			c.err = lineError(name, line, "expected %d indices and a value (%d fields), found %d fields", order, order+1, countFields(text))
			return c
		}
		v, msg := parseValue(f)
		if msg != "" {
			c.err = lineError(name, line, "value: %s", msg)
			return c
		}
		if extra, _ := nextField(text, fp); len(extra) > 0 {
			c.err = lineError(name, line, "expected %d indices and a value (%d fields), found %d fields", order, order+1, countFields(text))
			return c
		}
		for m := range order {
			c.inds[m] = append(c.inds[m], idx[m])
			c.maxIdx[m] = max(c.maxIdx[m], idx[m])
		}
		c.vals = append(c.vals, v)
	}
	return c
}

// joinTNSChunks concatenates the chunks in order into one tensor, picking
// from each chunk's indices as pk says right after copying them, while
// they are in the cache.
func joinTNSChunks(chunks []*tnsChunk, hdr tnsHeader, name string, pk *picker) (*COO, error) {
	nnz := 0
	for _, c := range chunks {
		nnz += len(c.vals)
	}
	if hdr.order == 0 || (nnz == 0 && hdr.dims == nil) {
		return nil, fileError(name, "no nonzeros: expected lines of 1-based indices and a value, found none")
	}
	if nnz > MaxNNZ {
		return nil, fileError(name, "expected at most %d nonzeros, found %d", MaxNNZ, nnz)
	}
	dims := hdr.dims
	if dims == nil {
		dims = make([]int, hdr.order)
		for _, c := range chunks {
			for m, i := range c.maxIdx {
				dims[m] = max(dims[m], int(i)+1)
			}
		}
		if err := CheckDims(dims); err != nil {
			return nil, fileError(name, "%v", err)
		}
	}
	// The picks' positions are drawn before the tensor's arrays are
	// allocated: the allocation starts a collection, and a draw that ran
	// beside it took 50-175 µs instead of 20-30 (its allocations assist
	// the marking, and the background workers take a core), a third of a
	// fresh process's decision on 1-2 M nonzeros (docs/model.md, "The
	// sample's draw and the collector").
	w := workers(len(chunks), 1)
	pk.start(nnz, hdr.order, w)
	t := &COO{Dims: dims, Inds: make([][]uint32, hdr.order), Vals: make([]float32, nnz)}
	for m := range t.Inds {
		t.Inds[m] = make([]uint32, nnz)
	}
	offsets := make([]int, len(chunks))
	for i, off := 0, 0; i < len(chunks); i++ {
		offsets[i] = off
		off += len(chunks[i].vals)
	}
	parallelChunks(len(chunks), w, func(slot, lo, hi int) {
		for i := lo; i < hi; i++ {
			c := chunks[i]
			for m := range t.Inds {
				copy(t.Inds[m][offsets[i]:], c.inds[m])
				pk.pick(slot, m, offsets[i], c.inds[m])
			}
			copy(t.Vals[offsets[i]:], c.vals)
		}
	})
	return t, nil
}

// WriteTNS writes t as FROSTT .tns text: 1-based indices and values in the
// shortest form that reads back to the same float32. When the dims cannot
// be inferred from the indices (a mode's largest index is below its dim, or
// there are no nonzeros) it writes the header variant (order and dims lines)
// so that reading the file gives t back exactly.
func WriteTNS(w io.Writer, t *COO) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if !dimsInferable(t) {
		hdr := strconv.AppendInt(nil, int64(t.Order()), 10)
		hdr = append(hdr, '\n')
		for m, d := range t.Dims {
			if m > 0 {
				hdr = append(hdr, ' ')
			}
			hdr = strconv.AppendInt(hdr, int64(d), 10)
		}
		hdr = append(hdr, '\n')
		if _, err := w.Write(hdr); err != nil {
			return err
		}
	}
	// Format chunks of nonzeros in parallel, write them in order.
	const chunk = 1 << 16
	nnz := t.NNZ()
	nw := workers(nnz, chunk)
	bufs := make([][]byte, nw)
	for start := 0; start < nnz; start += nw * chunk {
		end := min(start+nw*chunk, nnz)
		parallelChunks(end-start, nw, func(c, lo, hi int) {
			b := bufs[c][:0]
			for k := start + lo; k < start+hi; k++ {
				for m := range t.Inds {
					b = strconv.AppendUint(b, uint64(t.Inds[m][k])+1, 10)
					b = append(b, ' ')
				}
				b = strconv.AppendFloat(b, float64(t.Vals[k]), 'g', -1, 32)
				b = append(b, '\n')
			}
			bufs[c] = b
		})
		for _, b := range bufs {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// dimsInferable reports whether every mode's largest index is its dim - 1.
func dimsInferable(t *COO) bool {
	if t.NNZ() == 0 {
		return false
	}
	for m, ind := range t.Inds {
		var mx uint32
		for _, i := range ind {
			mx = max(mx, i)
		}
		if int(mx)+1 != t.Dims[m] {
			return false
		}
	}
	return true
}

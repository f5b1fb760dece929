package formats

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"unsafe"
)

// The .stb binary format, version 1. All integers are little-endian.
//
//	offset     size        field
//	0          8           magic "SPTNSR\x00\x1a"
//	8          2           format version (1)
//	10         2           order N (2 to 8)
//	12         4           reserved, zero
//	16         8           nnz
//	24         8*N         dims
//	24+8N      4           CRC-32C (Castagnoli) of the bytes above
//	28+8N      4*nnz*N     indices, 0-based uint32, mode by mode
//	...        4*nnz       values, IEEE 754 float32 bits
//	...        4*(N+1)     CRC-32C of each of the N+1 arrays, in order
//
// The header has its own checksum and is checked before anything is
// allocated; arrays are read in bounded pieces unless the stream's size is
// known and agrees with the header, so a corrupted nnz cannot make the
// reader allocate more than the stream holds. One checksum per array lets
// the arrays be verified in parallel.
const (
	stbMagic   = "SPTNSR\x00\x1a"
	stbVersion = 1
	stbFixed   = 24
	stbPiece   = 1 << 20 // elements read per piece when the size is unknown
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// stbArrays returns t's index arrays followed by its values as uint32s.
func stbArrays(t *COO) [][]uint32 {
	arrays := append([][]uint32(nil), t.Inds...)
	return append(arrays, valueBits(t.Vals))
}

// wordBytes views a as bytes; on a little-endian host these are the
// file's bytes.
func wordBytes(a []uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 4*len(a))
}

// WriteBinary writes t in the .stb binary format.
func WriteBinary(w io.Writer, t *COO) error {
	if err := t.Validate(); err != nil {
		return err
	}
	hdr := make([]byte, stbFixed+8*t.Order()+4)
	copy(hdr, stbMagic)
	binary.LittleEndian.PutUint16(hdr[8:], stbVersion)
	binary.LittleEndian.PutUint16(hdr[10:], uint16(t.Order()))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(t.NNZ()))
	for m, d := range t.Dims {
		binary.LittleEndian.PutUint64(hdr[stbFixed+8*m:], uint64(d))
	}
	n := len(hdr) - 4
	binary.LittleEndian.PutUint32(hdr[n:], crc32.Checksum(hdr[:n], castagnoli))
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	arrays := stbArrays(t)
	sums := make([]byte, 4*len(arrays))
	var buf []byte
	for i, a := range arrays {
		crc := uint32(0)
		if littleEndian {
			b := wordBytes(a)
			crc = crc32.Update(0, castagnoli, b)
			if _, err := w.Write(b); err != nil {
				return err
			}
		} else {
			if buf == nil {
				buf = make([]byte, 4*stbPiece)
			}
			for len(a) > 0 {
				k := min(len(a), stbPiece)
				for j, v := range a[:k] {
					binary.LittleEndian.PutUint32(buf[4*j:], v)
				}
				crc = crc32.Update(crc, castagnoli, buf[:4*k])
				if _, err := w.Write(buf[:4*k]); err != nil {
					return err
				}
				a = a[k:]
			}
		}
		binary.LittleEndian.PutUint32(sums[4*i:], crc)
	}
	_, err := w.Write(sums)
	return err
}

// stbReader reads a .stb stream, tracking the offset for error messages.
type stbReader struct {
	r    io.Reader
	name string
	off  int64
}

func (s *stbReader) read(p []byte, what string) error {
	n, err := io.ReadFull(s.r, p)
	s.off += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return offsetError(s.name, s.off, "truncated: expected %d more bytes of %s, found the end of the file", len(p)-n, what)
	}
	if err != nil {
		return offsetError(s.name, s.off, "read %s: %v", what, err)
	}
	return nil
}

// words reads n uint32s as the file stores them, little-endian: the
// checksum is over those bytes, so they are turned native only when
// checked (stbRun.add). Unless whole is set (the stream's size vouches
// for n), it reads in pieces and grows the array as data arrives, so a
// lying header costs no more memory than the stream holds.
func (s *stbReader) words(n int, whole bool, what string) ([]uint32, error) {
	var out []uint32
	if whole {
		out = make([]uint32, 0, n)
	} else {
		out = make([]uint32, 0, min(n, stbPiece))
	}
	for len(out) < n {
		k := n - len(out)
		if !whole {
			k = min(k, stbPiece)
			if len(out)+k > cap(out) {
				out = append(out[:cap(out)], make([]uint32, min(n, 2*cap(out)+k)-cap(out))...)[:len(out)]
			}
		}
		dst := out[len(out) : len(out)+k]
		if err := s.read(wordBytes(dst), what); err != nil {
			return nil, err
		}
		out = out[:len(out)+k]
	}
	return out, nil
}

// header reads and checks the header, leaving s at the first array.
func (s *stbReader) header() (order, nnz int, dims []int, err error) {
	name := s.name
	fixed := make([]byte, stbFixed)
	if err := s.read(fixed, "header"); err != nil {
		return 0, 0, nil, err
	}
	if string(fixed[:8]) != stbMagic {
		return 0, 0, nil, offsetError(name, 0, "expected the .stb magic %q, found %q: not a sparsetune binary tensor", stbMagic, fixed[:8])
	}
	if v := binary.LittleEndian.Uint16(fixed[8:]); v != stbVersion {
		return 0, 0, nil, offsetError(name, 8, "unsupported format version %d, this build reads %d", v, stbVersion)
	}
	order = int(binary.LittleEndian.Uint16(fixed[10:]))
	if order < MinOrder || order > MaxOrder {
		return 0, 0, nil, offsetError(name, 10, "expected an order of %d to %d, found %d", MinOrder, MaxOrder, order)
	}
	rest := make([]byte, 8*order+4)
	if err := s.read(rest, "header"); err != nil {
		return 0, 0, nil, err
	}
	hdr := append(fixed, rest[:8*order]...)
	if got, want := binary.LittleEndian.Uint32(rest[8*order:]), crc32.Checksum(hdr, castagnoli); got != want {
		return 0, 0, nil, offsetError(name, int64(len(hdr)), "header checksum mismatch: stored CRC-32C %08x, computed %08x: the file is corrupted", got, want)
	}
	if binary.LittleEndian.Uint32(fixed[12:]) != 0 {
		return 0, 0, nil, offsetError(name, 12, "expected the reserved field to be zero")
	}
	nnz64 := binary.LittleEndian.Uint64(fixed[16:])
	if nnz64 > MaxNNZ {
		return 0, 0, nil, offsetError(name, 16, "expected at most %d nonzeros, found %d", uint64(MaxNNZ), nnz64)
	}
	nnz = int(nnz64)
	dims = make([]int, order)
	for m := range dims {
		d := binary.LittleEndian.Uint64(hdr[stbFixed+8*m:])
		if d == 0 || d > MaxDim {
			return 0, 0, nil, offsetError(name, int64(stbFixed+8*m), "expected dim of mode %d to be 1 to %d, found %d", m+1, uint64(MaxDim), d)
		}
		dims[m] = int(d)
	}
	if err := CheckDims(dims); err != nil {
		return 0, 0, nil, offsetError(name, stbFixed, "%v", err)
	}
	return order, nnz, dims, nil
}

// ReadBinary reads a tensor in the .stb binary format from r. The name is
// used in error messages only. size is the stream's length in bytes when
// known (a plain file), or -1; a header that disagrees with it is refused
// before any array is read.
func ReadBinary(r io.Reader, name string, size int64) (*COO, error) {
	return readBinary(r, name, size, nil)
}

func readBinary(r io.Reader, name string, size int64, pk *picker) (*COO, error) {
	s := &stbReader{r: r, name: name}
	order, nnz, dims, err := s.header()
	if err != nil {
		return nil, err
	}
	want := s.off + 4*int64(nnz)*int64(order+1) + 4*int64(order+1)
	if size >= 0 && size != want {
		return nil, offsetError(name, 16, "header says %d nonzeros of order %d, a file of %d bytes, but the file has %d bytes (truncated or corrupted)", nnz, order, want, size)
	}
	if ra, ok := r.(io.ReaderAt); ok && size >= 0 {
		return readBinaryAt(ra, s.off, name, dims, nnz, pk)
	}
	// The picks' positions are drawn now, while the heap is small and no
	// collection runs: after the arrays are read, one may.
	w := workers(order+1, 1)
	pk.start(nnz, order, w)
	arrays := make([][]uint32, order+1)
	start := make([]int64, order+1) // offset of each array, for error messages
	for i := range arrays {
		what := "values"
		if i < order {
			what = "indices"
		}
		start[i] = s.off
		a, err := s.words(nnz, size >= 0, what)
		if err != nil {
			return nil, err
		}
		arrays[i] = a
	}
	sums := make([]byte, 4*(order+1))
	if err := s.read(sums, "checksums"); err != nil {
		return nil, err
	}
	if size < 0 {
		var one [1]byte
		if n, _ := io.ReadFull(r, one[:]); n > 0 {
			return nil, offsetError(name, s.off, "expected the end of the file after the checksums, found more bytes")
		}
	}
	// Verify every array in parallel: its checksum, then its content (a
	// valid checksum over bad content means a faulty writer: refuse it
	// too). Each array reports the first problem it finds.
	problems := make([]*ParseError, order+1)
	parallelChunks(order+1, w, func(slot, lo, hi int) {
		for i := lo; i < hi; i++ {
			problems[i] = checkSTBArray(name, arrays[i], i, dims, start[i], binary.LittleEndian.Uint32(sums[4*i:]), func(lo int, piece []uint32) { pk.pick(slot, i, lo, piece) })
		}
	})
	for _, p := range problems {
		if p != nil {
			return nil, p
		}
	}
	return stbCOO(dims, arrays), nil
}

// readBinaryAt reads the arrays of a .stb file whose size agrees with its
// header, from offset off on, by pread on every core: worker c of w
// takes the c-th of w runs of pieces of every array, and checks each
// piece (checksum, content, picks) as soon as it has read it, while it is
// in the cache. The copy out of the page cache and the page faults of
// the new arrays were most of a read on one goroutine (13-17 ms of 21-27
// for a 20 MB file on the 2-core VM), and they spread over the cores.
// Each worker's checksum of its run is combined with the others' in file
// order (crc32cCombine), and problems are reported as the sequential
// reader reports them: an array's checksum mismatch before bad content in
// it, the first array with a problem first.
func readBinaryAt(r io.ReaderAt, off int64, name string, dims []int, nnz int, pk *picker) (*COO, error) {
	order := len(dims)
	pieces := (nnz + stbCheckPiece - 1) / stbCheckPiece
	w := workers(pieces, 1)
	pk.start(nnz, order, w)
	// The arrays are cut from one allocation: each allocation of tens of
	// MB past the heap's goal started a collection, which found nothing
	// to free (a .stb read keeps all it allocates) but stopped the
	// readers and took a core to mark; one allocation starts one (read
	// time 7% and 14% less on two sets of 16 and 24 files of 1-7.5 M
	// nonzeros: docs/formats.md). Each array's capacity ends where the
	// next begins.
	arrays := make([][]uint32, order+1)
	start := make([]int64, order+1)
	all := make([]uint32, (order+1)*nnz)
	for i := range arrays {
		arrays[i] = all[i*nnz : (i+1)*nnz : (i+1)*nnz]
		start[i] = off + 4*int64(nnz)*int64(i)
	}
	sums := make([]byte, 4*(order+1))
	sumsAt := off + 4*int64(nnz)*int64(order+1)
	if n, err := r.ReadAt(sums, sumsAt); n < len(sums) {
		return nil, readAtError(name, sumsAt+int64(n), len(sums)-n, "checksums", err)
	}
	// run c of every array is pieces [c*pieces/w, (c+1)*pieces/w).
	runs := make([][]stbRun, order+1) // [array][worker]
	for i := range runs {
		runs[i] = make([]stbRun, w)
	}
	readErr := make([]*ParseError, w)
	parallelChunks(pieces, w, func(c, plo, phi int) {
		for i, a := range arrays {
			what := "values"
			if i < order {
				what = "indices"
			}
			rc := &runs[i][c]
			for p := plo; p < phi; p++ {
				lo := p * stbCheckPiece
				piece := a[lo:min(lo+stbCheckPiece, nnz)]
				at := start[i] + 4*int64(lo)
				if n, err := r.ReadAt(wordBytes(piece), at); n < 4*len(piece) {
					readErr[c] = readAtError(name, at+int64(n), 4*len(piece)-n, what, err)
					return
				}
				rc.add(name, piece, i, dims, at)
				if i < order {
					pk.pick(c, i, lo, piece)
				}
			}
		}
	})
	for _, e := range readErr {
		if e != nil {
			return nil, e
		}
	}
	// Run c's length is the same in every array: its operator is made
	// once (crc32cShift), not once per array.
	shifts := make([][32]uint32, w)
	for c := range shifts {
		lo, hi := c*pieces/w*stbCheckPiece, min((c+1)*pieces/w*stbCheckPiece, nnz)
		if hi > lo {
			shifts[c] = crc32cShift(4 * int64(hi-lo))
		}
	}
	for i := range arrays {
		var crc uint32
		var bad *ParseError
		for c, rc := range runs[i] {
			if shifts[c] != ([32]uint32{}) {
				crc = apply(shifts[c], crc) ^ rc.crc
			}
			if bad == nil {
				bad = rc.bad
			}
		}
		if want := binary.LittleEndian.Uint32(sums[4*i:]); crc != want {
			return nil, checksumError(name, start[i], i, order, want, crc)
		}
		if bad != nil {
			return nil, bad
		}
	}
	return stbCOO(dims, arrays), nil
}

// stbCOO returns the tensor of a .stb file's arrays, read and checked: the
// indices of each mode, then the values' bits, used as float32s in place.
func stbCOO(dims []int, arrays [][]uint32) *COO {
	order, vals := len(dims), arrays[len(dims)]
	return &COO{
		Dims: dims,
		Inds: arrays[:order:order],
		Vals: unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals)),
	}
}

// fromLittleEndian turns words read as little-endian bytes into native
// ones: nothing to do on a little-endian host.
func fromLittleEndian(a []uint32) {
	if littleEndian {
		return
	}
	for i := range a {
		a[i] = binary.LittleEndian.Uint32((*[4]byte)(unsafe.Pointer(&a[i]))[:])
	}
}

// readAtError is the error of a pread that returned fewer bytes than
// asked: the file ended (it shrank after its size was read) or failed.
func readAtError(name string, at int64, missing int, what string, err error) *ParseError {
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return offsetError(name, at, "truncated: expected %d more bytes of %s, found the end of the file", missing, what)
	}
	return offsetError(name, at, "read %s: %v", what, err)
}

// checksumError reports array i's checksum mismatch.
func checksumError(name string, start int64, i, order int, want, got uint32) *ParseError {
	what := "values"
	if i < order {
		what = "mode " + string(rune('1'+i)) + " indices"
	}
	return offsetError(name, start, "checksum mismatch in the %s: stored CRC-32C %08x, computed %08x: the file is corrupted", what, want, got)
}

// stbCheckPiece is the words checkSTBArray checks at a time: 256 KiB,
// which stays in an L2 cache between the checksum, the content check and
// the picks.
const stbCheckPiece = 1 << 16

// checkSTBArray verifies array i (a mode's indices, or the values when i is
// the order) against its checksum and its dim or finiteness. It goes a
// piece at a time, the checksum, the content and then pick(lo, piece) for
// a mode's indices from position lo, so that the array crosses the memory
// bus once, not once per check. A checksum mismatch is reported before a
// content problem: bad content under a valid checksum is a faulty writer,
// under an invalid one a corrupted file. a holds the file's words as read
// (little-endian); each piece is turned native once its checksum is taken.
func checkSTBArray(name string, a []uint32, i int, dims []int, start int64, sum uint32, pick func(lo int, piece []uint32)) *ParseError {
	var run stbRun
	for lo := 0; lo < len(a); lo += stbCheckPiece {
		piece := a[lo:min(lo+stbCheckPiece, len(a))]
		run.add(name, piece, i, dims, start+4*int64(lo))
		if i < len(dims) {
			pick(lo, piece)
		}
	}
	if run.crc != sum {
		return checksumError(name, start, i, len(dims), sum, run.crc)
	}
	return run.bad
}

// stbRun is the check of consecutive pieces of one array: the CRC-32C of
// the pieces so far and their first content problem.
type stbRun struct {
	crc uint32
	bad *ParseError
}

// add checks the next piece of array i, at offset at in the file: its
// checksum, over the file's bytes as read into piece, then, with the words
// turned native (a no-op on little-endian hosts), its content unless an
// earlier piece had a problem.
func (r *stbRun) add(name string, piece []uint32, i int, dims []int, at int64) {
	r.crc = crc32.Update(r.crc, castagnoli, wordBytes(piece))
	fromLittleEndian(piece)
	if r.bad == nil {
		r.bad = checkSTBContent(name, piece, i, dims, at)
	}
}

// checkSTBContent checks array i's content: indices below their dim, or
// finite values.
func checkSTBContent(name string, a []uint32, i int, dims []int, start int64) *ParseError {
	if i < len(dims) {
		last := uint32(dims[i] - 1)
		for k, v := range a {
			if v > last {
				return offsetError(name, start+4*int64(k), "mode %d: expected an index below the dim %d, found %d (0-based)", i+1, dims[i], v)
			}
		}
		return nil
	}
	for k, v := range a {
		if f := float64(math.Float32frombits(v)); math.IsNaN(f) || math.IsInf(f, 0) {
			return offsetError(name, start+4*int64(k), "expected a finite value, found %v", f)
		}
	}
	return nil
}

package formats

import (
	"encoding/binary"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"unsafe"
)

// The .stb binary format, version 1. All integers are little-endian.
//
//	offset  size        field
//	0       8           magic "SPTNSR\x00\x1a"
//	8       2           format version (1)
//	10      2           order N (2 to 8)
//	12      4           reserved, zero
//	16      8           nnz
//	24      8*N         dims
//	24+8N   4*nnz*N     indices, 0-based uint32, mode by mode
//	...     4*nnz       values, IEEE 754 float32 bits
//	...     4           CRC-32C (Castagnoli) of every byte before it
//
// The header is checked before anything is allocated, and arrays are read in
// bounded pieces, so a corrupted nnz cannot make the reader allocate more
// than the stream holds.
const (
	stbMagic   = "SPTNSR\x00\x1a"
	stbVersion = 1
	stbFixed   = 24
	stbPiece   = 1 << 20 // elements read per piece
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// WriteBinary writes t in the .stb binary format.
func WriteBinary(w io.Writer, t *COO) error {
	if err := t.Validate(); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	mw := io.MultiWriter(w, crc)
	hdr := make([]byte, stbFixed+8*t.Order())
	copy(hdr, stbMagic)
	binary.LittleEndian.PutUint16(hdr[8:], stbVersion)
	binary.LittleEndian.PutUint16(hdr[10:], uint16(t.Order()))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(t.NNZ()))
	for m, d := range t.Dims {
		binary.LittleEndian.PutUint64(hdr[stbFixed+8*m:], uint64(d))
	}
	if _, err := mw.Write(hdr); err != nil {
		return err
	}
	for _, ind := range t.Inds {
		if err := writeWords(mw, ind); err != nil {
			return err
		}
	}
	if err := writeWords(mw, unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(t.Vals))), len(t.Vals))); err != nil {
		return err
	}
	return binary.Write(w, binary.LittleEndian, crc.Sum32())
}

// writeWords writes a as little-endian uint32s.
func writeWords(w io.Writer, a []uint32) error {
	if littleEndian {
		_, err := w.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 4*len(a)))
		return err
	}
	buf := make([]byte, 4*min(len(a), stbPiece))
	for len(a) > 0 {
		n := min(len(a), stbPiece)
		for i, v := range a[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], v)
		}
		if _, err := w.Write(buf[:4*n]); err != nil {
			return err
		}
		a = a[n:]
	}
	return nil
}

// stbReader reads a .stb stream, tracking the offset and the checksum.
type stbReader struct {
	r    io.Reader
	name string
	off  int64
	crc  hash.Hash32
}

func (s *stbReader) read(p []byte, what string) error {
	n, err := io.ReadFull(s.r, p)
	s.crc.Write(p[:n])
	s.off += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return offsetError(s.name, s.off, "truncated: expected %d more bytes of %s, found the end of the file", len(p)-n, what)
	}
	if err != nil {
		return offsetError(s.name, s.off, "read %s: %v", what, err)
	}
	return nil
}

// words reads n little-endian uint32s in bounded pieces.
func (s *stbReader) words(n int, what string) ([]uint32, error) {
	out := make([]uint32, 0, min(n, 16*stbPiece))
	var tmp []byte
	for len(out) < n {
		k := min(n-len(out), stbPiece)
		if len(out)+k > cap(out) {
			grown := make([]uint32, len(out), min(n, 2*cap(out)+k))
			copy(grown, out)
			out = grown
		}
		dst := out[len(out) : len(out)+k]
		if littleEndian {
			if err := s.read(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*k), what); err != nil {
				return nil, err
			}
		} else {
			if tmp == nil {
				tmp = make([]byte, 4*stbPiece)
			}
			if err := s.read(tmp[:4*k], what); err != nil {
				return nil, err
			}
			for i := range dst {
				dst[i] = binary.LittleEndian.Uint32(tmp[4*i:])
			}
		}
		out = out[:len(out)+k]
	}
	return out, nil
}

// ReadBinary reads a tensor in the .stb binary format from r. The name is
// used in error messages only. size is the stream's length in bytes when
// known (a plain file), or -1; a header that disagrees with it is refused
// before any array is read.
func ReadBinary(r io.Reader, name string, size int64) (*COO, error) {
	s := &stbReader{r: r, name: name, crc: crc32.New(castagnoli)}
	fixed := make([]byte, stbFixed)
	if err := s.read(fixed, "header"); err != nil {
		return nil, err
	}
	if string(fixed[:8]) != stbMagic {
		return nil, offsetError(name, 0, "expected the .stb magic %q, found %q: not a sparsetune binary tensor", stbMagic, fixed[:8])
	}
	if v := binary.LittleEndian.Uint16(fixed[8:]); v != stbVersion {
		return nil, offsetError(name, 8, "unsupported format version %d, this build reads %d", v, stbVersion)
	}
	order := int(binary.LittleEndian.Uint16(fixed[10:]))
	if order < MinOrder || order > MaxOrder {
		return nil, offsetError(name, 10, "expected an order of %d to %d, found %d", MinOrder, MaxOrder, order)
	}
	if binary.LittleEndian.Uint32(fixed[12:]) != 0 {
		return nil, offsetError(name, 12, "expected the reserved field to be zero")
	}
	nnz64 := binary.LittleEndian.Uint64(fixed[16:])
	if nnz64 > MaxNNZ {
		return nil, offsetError(name, 16, "expected at most %d nonzeros, found %d", uint64(MaxNNZ), nnz64)
	}
	nnz := int(nnz64)
	dimBytes := make([]byte, 8*order)
	if err := s.read(dimBytes, "dims"); err != nil {
		return nil, err
	}
	dims := make([]int, order)
	for m := range dims {
		d := binary.LittleEndian.Uint64(dimBytes[8*m:])
		if d == 0 || d > MaxDim {
			return nil, offsetError(name, int64(stbFixed+8*m), "expected dim of mode %d to be 1 to %d, found %d", m+1, uint64(MaxDim), d)
		}
		dims[m] = int(d)
	}
	if err := CheckDims(dims); err != nil {
		return nil, offsetError(name, stbFixed, "%v", err)
	}
	want := int64(stbFixed+8*order) + 4*int64(nnz)*int64(order+1) + 4
	if size >= 0 && size != want {
		return nil, offsetError(name, 16, "header says %d nonzeros of order %d, a file of %d bytes, but the file has %d bytes (truncated or corrupted)", nnz, order, want, size)
	}
	t := &COO{Dims: dims, Inds: make([][]uint32, order)}
	start := make([]int64, order+1) // offset of each array, for error messages
	for m := range t.Inds {
		start[m] = s.off
		ind, err := s.words(nnz, "indices")
		if err != nil {
			return nil, err
		}
		t.Inds[m] = ind
	}
	start[order] = s.off
	vals, err := s.words(nnz, "values")
	if err != nil {
		return nil, err
	}
	t.Vals = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals))
	sum := s.crc.Sum32()
	tail := make([]byte, 4)
	if err := s.read(tail, "checksum"); err != nil {
		return nil, err
	}
	if got := binary.LittleEndian.Uint32(tail); got != sum {
		return nil, offsetError(name, s.off-4, "checksum mismatch: stored CRC-32C %08x, computed %08x: the file is corrupted", got, sum)
	}
	if size < 0 {
		var one [1]byte
		if n, _ := io.ReadFull(r, one[:]); n > 0 {
			return nil, offsetError(name, s.off, "expected the end of the file after the checksum, found more bytes")
		}
	}
	// A valid checksum over invalid content means a faulty writer, not a
	// faulty disk: still refuse it.
	for m, ind := range t.Inds {
		dim := uint32(dims[m] - 1)
		for k, i := range ind {
			if i > dim {
				return nil, offsetError(name, start[m]+4*int64(k), "mode %d: expected an index below the dim %d, found %d (0-based)", m+1, dims[m], i)
			}
		}
	}
	for k, v := range t.Vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, offsetError(name, start[order]+4*int64(k), "expected a finite value, found %v", v)
		}
	}
	return t, nil
}

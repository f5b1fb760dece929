package formats

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"unsafe"
)

// BinaryPart is the nonzeros [Lo, Hi) of a .stb file, read without the
// rest: how the ranks of a distributed job read one file, each its own
// byte ranges. The whole arrays' checksums cannot be checked from a part;
// the parts' checksums (Sums) can, together, by VerifyBinaryParts.
type BinaryPart struct {
	*COO            // the part's nonzeros, with the whole tensor's dims
	Lo, Hi int      // the part's nonzeros in the file
	Total  int      // the whole tensor's nonzeros
	Sums   []uint32 // CRC-32C of the part's bytes of each array: each mode's indices, then the values
	Stored []uint32 // the file's CRC-32C of each whole array
}

// ReadBinaryPart reads part k of parts of the .stb file at path: the
// nonzeros [k·nnz/parts, (k+1)·nnz/parts), by reading only their byte
// ranges of each array. It checks the header (and its checksum), the
// file's size and the part's indices and values, as ReadBinary does.
func ReadBinaryPart(path string, k, parts int) (*BinaryPart, error) {
	if parts < 1 || k < 0 || k >= parts {
		return nil, fmt.Errorf("%s: part %d of %d", path, k, parts)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	s := &stbReader{r: f, name: path}
	order, nnz, dims, err := s.header()
	if err != nil {
		return nil, err
	}
	base := s.off
	size := base + 4*int64(nnz)*int64(order+1) + 4*int64(order+1)
	if st.Size() != size {
		return nil, offsetError(path, 16, "header says %d nonzeros of order %d, a file of %d bytes, but the file has %d bytes (truncated or corrupted)", nnz, order, size, st.Size())
	}
	lo, hi := k*nnz/parts, (k+1)*nnz/parts
	p := &BinaryPart{Lo: lo, Hi: hi, Total: nnz, Sums: make([]uint32, order+1), Stored: make([]uint32, order+1)}
	arrays := make([][]uint32, order+1)
	for i := range arrays {
		a := make([]uint32, hi-lo)
		start := base + 4*int64(nnz)*int64(i) + 4*int64(lo)
		if _, err := f.ReadAt(wordBytes(a), start); err != nil {
			return nil, offsetError(path, start, "read part %d of %d: %v", k, parts, err)
		}
		p.Sums[i] = crc32.Checksum(wordBytes(a), castagnoli)
		fromLittleEndian(a)
		if problem := checkSTBContent(path, a, i, dims, start); problem != nil {
			return nil, problem
		}
		arrays[i] = a
	}
	sums := make([]byte, 4*(order+1))
	if _, err := f.ReadAt(sums, size-int64(len(sums))); err != nil {
		return nil, offsetError(path, size-int64(len(sums)), "read the checksums: %v", err)
	}
	for i := range p.Stored {
		p.Stored[i] = binary.LittleEndian.Uint32(sums[4*i:])
	}
	vals := arrays[order]
	p.COO = &COO{Dims: dims, Inds: arrays[:order:order], Vals: unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals))}
	return p, nil
}

// VerifyBinaryParts checks the parts of one .stb file against the file's
// checksums: sums[k] and lens[k] are part k's Sums and nonzeros, the parts
// in file order and covering the file. It is how the ranks that read a
// file by parts know that together they read it intact.
func VerifyBinaryParts(name string, stored []uint32, sums [][]uint32, lens []int) error {
	for i, want := range stored {
		var crc uint32
		for k, ps := range sums {
			if len(ps) != len(stored) {
				return fmt.Errorf("%s: part %d has %d checksums, the file %d", name, k, len(ps), len(stored))
			}
			crc = crc32cCombine(crc, ps[i], 4*int64(lens[k]))
		}
		if crc != want {
			what := "values"
			if i < len(stored)-1 {
				what = fmt.Sprintf("mode %d indices", i+1)
			}
			return fmt.Errorf("%s: checksum mismatch in the %s: stored CRC-32C %08x, the parts give %08x: the file is corrupted", name, what, want, crc)
		}
	}
	return nil
}

// crc32cCombine returns the CRC-32C of a ‖ b from a's and b's CRC-32C and
// b's length. Appending a byte to a message maps its (pre- and
// post-conditioned) CRC linearly over GF(2), so appending n zero bytes is
// a 32x32 bit matrix, raised to the n-th power by squaring; the CRC of
// a ‖ b is that power applied to crc(a), xor crc(b).
func crc32cCombine(a, b uint32, n int64) uint32 {
	if n <= 0 {
		return a // b is the CRC of "", 0
	}
	return apply(crc32cShift(n), a) ^ b
}

// crc32cShift returns the operator that appending n > 0 zero bytes
// applies to a CRC-32C: crc32cCombine(a, b, n) is apply(crc32cShift(n),
// a) ^ b. Making it costs about 20 µs; a caller that combines many CRCs
// of blocks of one length makes it once.
func crc32cShift(n int64) [32]uint32 {
	// bit is the operator of one zero bit: a shift right, folding the
	// polynomial in where the low bit falls out.
	var bit [32]uint32
	bit[0] = 0x82f63b78 // Castagnoli, reflected
	for i := 1; i < 32; i++ {
		bit[i] = 1 << (i - 1)
	}
	op := square(square(square(bit))) // eight zero bits: one zero byte
	var shift [32]uint32
	for i := range shift {
		shift[i] = 1 << i // the identity
	}
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			shift = mul(op, shift)
		}
		op = square(op)
	}
	return shift
}

// mul returns the product a·b of two GF(2) matrices (column i of m is
// m[i]): b applied first.
func mul(a, b [32]uint32) [32]uint32 {
	var out [32]uint32
	for i := range out {
		out[i] = apply(a, b[i])
	}
	return out
}

// apply multiplies the GF(2) matrix m (column i is m[i]) by the vector v.
func apply(m [32]uint32, v uint32) uint32 {
	var out uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			out ^= m[i]
		}
	}
	return out
}

// square returns m·m.
func square(m [32]uint32) [32]uint32 { return mul(m, m) }

// Package npy writes and reads NumPy .npy files of float32 arrays (format
// version 1.0, little-endian '<f4', C order), the files sparsetune's
// decompositions write their factors to. Only what sparsetune writes is
// read back: enough for tests and for resuming from written factors.
package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

// magic opens every .npy file; version 1.0 follows it.
const magic = "\x93NUMPY"

// Encode writes a float32 array of the given shape (C order, len(data) the
// product of shape) in .npy format 1.0.
func Encode(w io.Writer, shape []int, data []float32) error {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("npy: negative dim in shape %v", shape)
		}
		n *= d
	}
	if n != len(data) {
		return fmt.Errorf("npy: shape %v holds %d values, found %d", shape, n, len(data))
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += "," // a Python 1-tuple
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", tuple)
	// Pad with spaces and a final newline so the data starts at a multiple
	// of 64 bytes, as NumPy writes it (and as memory-mapping readers like).
	const prefix = len(magic) + 2 + 2
	total := prefix + len(header) + 1
	pad := (64 - total%64) % 64
	header += strings.Repeat(" ", pad) + "\n"
	if len(header) > math.MaxUint16 {
		return fmt.Errorf("npy: header of %d bytes is too long for format 1.0", len(header))
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(magic)
	bw.Write([]byte{1, 0})
	binary.Write(bw, binary.LittleEndian, uint16(len(header)))
	bw.WriteString(header)
	var buf [4]byte
	for _, v := range data {
		binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
		bw.Write(buf[:])
	}
	return bw.Flush()
}

// WriteFile writes the array to path through a temporary file renamed
// over it, so path never holds a partial array.
func WriteFile(path string, shape []int, data []float32) error {
	return atomicfile.Write(path, func(w io.Writer) error { return Encode(w, shape, data) })
}

// Decode reads a .npy array of '<f4' values in C order, as Encode writes,
// and nothing after it: bytes past the data mean a file of another shape
// or a damaged one, not an array to take a prefix of.
func Decode(r io.Reader) (shape []int, data []float32, err error) {
	br := bufio.NewReader(r)
	var pre [10]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return nil, nil, fmt.Errorf("npy: header: %w", err)
	}
	if string(pre[:6]) != magic {
		return nil, nil, errors.New("npy: not a .npy file (bad magic)")
	}
	if pre[6] != 1 {
		return nil, nil, fmt.Errorf("npy: format version %d.%d, only 1.0 is read", pre[6], pre[7])
	}
	hlen := int(binary.LittleEndian.Uint16(pre[8:]))
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(br, hb); err != nil {
		return nil, nil, fmt.Errorf("npy: header: %w", err)
	}
	h := string(hb)
	if !strings.Contains(h, "'descr': '<f4'") {
		return nil, nil, fmt.Errorf("npy: dtype is not '<f4' in header %q", strings.TrimSpace(h))
	}
	if !strings.Contains(h, "'fortran_order': False") {
		return nil, nil, fmt.Errorf("npy: not C order in header %q", strings.TrimSpace(h))
	}
	i := strings.Index(h, "'shape': (")
	j := strings.Index(h[max(i, 0):], ")")
	if i < 0 || j < 0 {
		return nil, nil, fmt.Errorf("npy: no shape in header %q", strings.TrimSpace(h))
	}
	n := 1
	for _, f := range strings.Split(h[i+len("'shape': ("):i+j], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := strconv.Atoi(f)
		if err != nil || d < 0 {
			return nil, nil, fmt.Errorf("npy: bad dim %q in header %q", f, strings.TrimSpace(h))
		}
		shape = append(shape, d)
		if d != 0 && n > maxValues/d {
			return nil, nil, fmt.Errorf("npy: shape %s holds more than %d values", h[i+len("'shape': "):i+j+1], maxValues)
		}
		n *= d
	}
	// The data is read a chunk at a time, so that a header claiming more
	// values than the file holds ends in an error, not in an allocation
	// of what it claims.
	var buf [4 << 10]byte
	data = make([]float32, 0, min(n, 1<<20))
	for len(data) < n {
		c := min(n-len(data), len(buf)/4)
		if got, err := io.ReadFull(br, buf[:4*c]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, fmt.Errorf("npy: data of shape %v: %d of %d values, then %w", shape, len(data)+got/4, n, err)
		}
		for k := range c {
			data = append(data, math.Float32frombits(binary.LittleEndian.Uint32(buf[4*k:])))
		}
	}
	if extra, _ := io.Copy(io.Discard, br); extra > 0 {
		return nil, nil, fmt.Errorf("npy: %d bytes after the %d values of shape %v", extra, n, shape)
	}
	return shape, data, nil
}

// maxValues bounds the values Decode accepts: the most a slice of
// float32 holds on a 32-bit platform, far more than any factor matrix.
const maxValues = math.MaxInt32 / 4

// ReadFile reads the .npy file at path (see Decode).
func ReadFile(path string) ([]int, []float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	shape, data, err := Decode(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return shape, data, nil
}

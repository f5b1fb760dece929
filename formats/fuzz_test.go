package formats

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// The fuzz targets check the readers never panic, that whatever they accept
// is a valid tensor, and that writing it back and reading it again gives
// the same tensor. Seeds: the f.Add calls below and testdata/fuzz/<Name>/.

func FuzzReadTNS(f *testing.F) {
	for _, s := range []string{
		"1 2 3 1.5\n2 1 1 -2\n",
		"# c\n\n1\t1 4e3\r\n",
		"3\n4 5 6\n1 2 3 1\n",
		"2\n3 3\n",
		"1 1 1 1 1 1 1 1 0.1\n",
		"1 0 1.0\n",
		"1 1 nan\n",
		"8\n4294967296 4294967296 4294967296 4294967296 4294967296 4294967296 4294967296 4294967296\n",
		"4294967296 1 1e-45\n",
		"1 1 3.4028235e+38\n2 2 -1.17549435e-38\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pk := &picker{positions: fuzzPositions}
		x, err := readTNS(bytes.NewReader(data), "fuzz.tns", pk)
		checkFuzzPicks(t, x, pk)
		ref, refLine, refErr := refReadTNS(data)
		if (err == nil) != (refErr == "") {
			t.Fatalf("reader says %v, the sequential reference says %q", err, refErr)
		}
		if err != nil {
			if pe, ok := err.(*ParseError); !ok || pe.Line != refLine {
				t.Fatalf("reader says %v, the sequential reference says line %d: %s", err, refLine, refErr)
			}
			return
		}
		if !x.Equal(ref) {
			t.Fatalf("reader and sequential reference disagree: %v %v %v vs %v %v %v", x.Dims, x.Inds, x.Vals, ref.Dims, ref.Inds, ref.Vals)
		}
		if err := x.Validate(); err != nil {
			t.Fatalf("accepted an invalid tensor: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteTNS(&buf, x); err != nil {
			t.Fatal(err)
		}
		y, err := ReadTNS(&buf, "again.tns")
		if err != nil {
			t.Fatalf("cannot read back what was written: %v", err)
		}
		if !y.Equal(x) {
			t.Fatal("round trip changed the tensor")
		}
	})
}

func FuzzReadMTX(f *testing.F) {
	for _, s := range []string{
		"%%MatrixMarket matrix coordinate real general\n% c\n2 3 2\n1 1 1.5\n2 3 -2\n",
		"%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n1 1\n3 1\n",
		"%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 1\n2 1 5\n",
		"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
		"%%MatrixMarket matrix array real general\n1 1\n1\n",
		"%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n",
		"%%matrixmarket MATRIX Coordinate Real General\n1 1 0\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ReadMTX(bytes.NewReader(data), "fuzz.mtx")
		if err != nil {
			return
		}
		if err := x.Validate(); err != nil {
			t.Fatalf("accepted an invalid tensor: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteMTX(&buf, x); err != nil {
			t.Fatal(err)
		}
		y, err := ReadMTX(&buf, "again.mtx")
		if err != nil {
			t.Fatalf("cannot read back what was written: %v", err)
		}
		if !y.Equal(x) {
			t.Fatal("round trip changed the tensor")
		}
	})
}

func FuzzReadBinary(f *testing.F) {
	x, _ := NewCOO([]int{4, 5, 6}, 0)
	x.Append([]uint32{0, 1, 2}, 1.5)
	x.Append([]uint32{3, 4, 5}, -2)
	var buf bytes.Buffer
	WriteBinary(&buf, x)
	f.Add(buf.Bytes(), true)
	f.Add(buf.Bytes(), false)
	f.Add(buf.Bytes()[:40], false)
	m, _ := NewCOO([]int{1 << 20, 3}, 0)
	buf.Reset()
	WriteBinary(&buf, m)
	f.Add(buf.Bytes(), true)
	f.Fuzz(func(t *testing.T, data []byte, sized bool) {
		size := int64(-1)
		if sized {
			size = int64(len(data))
		}
		pk := &picker{positions: fuzzPositions}
		x, err := readBinary(bytes.NewReader(data), "fuzz.stb", size, pk)
		if err != nil {
			return
		}
		checkFuzzPicks(t, x, pk)
		if err := x.Validate(); err != nil {
			t.Fatalf("accepted an invalid tensor: %v", err)
		}
		var out bytes.Buffer
		if err := WriteBinary(&out, x); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatal("an accepted file does not write back byte for byte")
		}
	})
}

// refReadTNS is a deliberately simple, sequential .tns reader written from
// the format's rules (see frostt.go), used as the oracle of FuzzReadTNS: the
// real reader must accept exactly what it accepts, build the same tensor,
// and report the same line (0 for errors about the whole file). Values go
// through strconv.ParseFloat with bitSize 32, the correctly rounded parse.
func refReadTNS(data []byte) (x *COO, errLine int, err string) {
	order := 0
	var dims []int // declared by the header variant
	var inds [MaxOrder][]uint32
	var vals []float32
	maxIdx := make([]int, MaxOrder)
	wantDims := false
	lines := strings.Split(string(data), "\n")
	for n, text := range lines {
		line := n + 1
		fields := strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(" \t\r\v\f", r) })
		for i, f := range fields {
			if f[0] == '#' {
				fields = fields[:i]
				break
			}
		}
		switch {
		case len(fields) == 0:
			continue
		case wantDims:
			if len(fields) != order {
				return nil, line, "dims count"
			}
			for _, f := range fields {
				d, e := strconv.ParseUint(f, 10, 64)
				if e != nil || d == 0 || d > MaxDim {
					return nil, line, "bad dim"
				}
				dims = append(dims, int(d))
			}
			if CheckDims(dims) != nil {
				return nil, line, "dims overflow"
			}
			wantDims = false
			continue
		case order == 0 && len(fields) == 1:
			o, e := strconv.Atoi(fields[0])
			if e != nil || o < MinOrder || o > MaxOrder {
				return nil, line, "bad order line"
			}
			order, wantDims = o, true
			continue
		case order == 0:
			order = len(fields) - 1
			if order < MinOrder || order > MaxOrder {
				return nil, line, "bad order"
			}
		}
		if len(fields) != order+1 {
			return nil, line, "field count"
		}
		for m := range order {
			f := fields[m]
			if strings.TrimLeft(f, "0123456789") != "" {
				return nil, line, "not an index"
			}
			i, e := strconv.ParseUint(f, 10, 64)
			if e != nil || i == 0 || i > MaxDim || (dims != nil && i > uint64(dims[m])) {
				return nil, line, "bad index"
			}
			inds[m] = append(inds[m], uint32(i-1))
			maxIdx[m] = max(maxIdx[m], int(i))
		}
		v, e := strconv.ParseFloat(fields[order], 32)
		if e != nil || math.IsInf(v, 0) || math.IsNaN(v) || underflows(fields[order], v) {
			return nil, line, "bad value"
		}
		vals = append(vals, float32(v))
	}
	if wantDims {
		// The line after the last one, as the reader counts.
		consumed := len(lines)
		if lines[len(lines)-1] == "" {
			consumed--
		}
		return nil, consumed + 1, "no dims line"
	}
	if order == 0 || (len(vals) == 0 && dims == nil) {
		return nil, 0, "no nonzeros"
	}
	if dims == nil {
		dims = maxIdx[:order]
		if CheckDims(dims) != nil {
			return nil, 0, "inferred dims overflow"
		}
	}
	x = &COO{Dims: dims, Inds: make([][]uint32, order), Vals: vals}
	if vals == nil {
		x.Vals = []float32{}
	}
	for m := range order {
		x.Inds[m] = inds[m]
		if x.Inds[m] == nil {
			x.Inds[m] = []uint32{}
		}
	}
	return x, 0, ""
}

// fuzzPositions picks the first, a middle and the last nonzero, the
// middle one twice.
func fuzzPositions(nnz int) []uint64 {
	if nnz == 0 {
		return nil
	}
	return []uint64{0, uint64(nnz / 2), uint64(nnz / 2), uint64(nnz - 1)}
}

// checkFuzzPicks checks what a reader picked against the tensor it read
// (nothing when it failed).
func checkFuzzPicks(t *testing.T, x *COO, pk *picker) {
	t.Helper()
	if x == nil {
		return
	}
	p := pk.done()
	if p == nil {
		if x.NNZ() > 0 {
			t.Fatalf("no picks from a tensor of %d nonzeros", x.NNZ())
		}
		return
	}
	if err := checkPicks(p, x); err != nil {
		t.Fatal(err)
	}
}

// underflows reports whether s, which strconv read as v, names a nonzero
// value that float32 rounds to 0, by math/big's exact parse.
func underflows(s string, v float64) bool {
	if v != 0 {
		return false
	}
	x, _, err := big.ParseFloat(s, 0, 64, big.ToNearestEven)
	return err == nil && x.Sign() != 0
}

package formats

import (
	"bytes"
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
		x, err := ReadTNS(bytes.NewReader(data), "fuzz.tns")
		if err != nil {
			return
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
		x, err := ReadBinary(bytes.NewReader(data), "fuzz.stb", size)
		if err != nil {
			return
		}
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

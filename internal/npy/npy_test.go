package npy

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, shape := range [][]int{{3}, {2, 3}, {2, 1, 4}, {0, 5}} {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]float32, n)
		for k := range data {
			data[k] = float32(k)*0.5 - 1
		}
		var buf bytes.Buffer
		if err := Encode(&buf, shape, data); err != nil {
			t.Fatal(err)
		}
		hlen := int(buf.Bytes()[8]) | int(buf.Bytes()[9])<<8
		if (10+hlen)%64 != 0 || buf.Bytes()[10+hlen-1] != '\n' {
			t.Fatalf("%v: header of %d bytes not padded to 64 with a newline", shape, hlen)
		}
		gs, gd, err := Decode(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gs, shape) || !slices.Equal(gd, data) {
			t.Fatalf("%v: read back %v %v", shape, gs, gd)
		}
	}
	if err := Encode(&bytes.Buffer{}, []int{2, 2}, make([]float32, 3)); err == nil {
		t.Fatal("wrong length accepted")
	}
}

// TestNumPyReads checks the file with NumPy itself where it is installed.
func TestNumPyReads(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 absent")
	}
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		t.Skip("numpy absent")
	}
	path := filepath.Join(t.TempDir(), "a.npy")
	if err := WriteFile(path, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6.5}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", "import numpy as np, sys; a = np.load(sys.argv[1]); print(a.dtype, a.shape, a[1, 2], a.flags['C_CONTIGUOUS'])", path).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "float32 (2, 3) 6.5 True" {
		t.Fatalf("numpy read %q", got)
	}
}

// header returns a .npy file of the given header dict and data bytes.
func header(dict string, data []byte) []byte {
	h := dict + strings.Repeat(" ", (64-(10+len(dict)+1)%64)%64) + "\n"
	b := append([]byte(magic+"\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

// TestDecodeErrors: a file that is not what Encode writes gets an error
// that says what is wrong, and a header claiming more values than the
// file holds fails on the data, without allocating what it claims.
func TestDecodeErrors(t *testing.T) {
	const f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': "
	for _, c := range []struct {
		name string
		file []byte
		err  string
	}{
		{"empty", nil, "header: EOF"},
		{"bad magic", []byte("\x93NUMPX\x01\x00\x00\x00"), "bad magic"},
		{"version 2", []byte(magic + "\x02\x00\x00\x00"), "format version 2.0"},
		{"short header", []byte(magic + "\x01\x00\x40\x00{'descr'"), "header: unexpected EOF"},
		{"float64", header("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", make([]byte, 16)), "dtype is not '<f4'"},
		{"Fortran order", header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", make([]byte, 8)), "not C order"},
		{"no shape", header("{'descr': '<f4', 'fortran_order': False, }", nil), "no shape"},
		{"negative dim", header(f4+"(2, -3), }", nil), `bad dim "-3"`},
		{"not a number", header(f4+"(2, x), }", nil), `bad dim "x"`},
		{"short data", header(f4+"(2, 3), }", make([]byte, 20)), "5 of 6 values, then unexpected EOF"},
		{"claims a terabyte", header(f4+"(100000000000, 4), }", make([]byte, 64)), "more than"},
		{"claims 2^62 rows", header(f4+"(4611686018427387904, 4), }", make([]byte, 64)), "more than"},
		{"claims 100 M values", header(f4+"(25000000, 4), }", make([]byte, 64)), "16 of 100000000 values, then unexpected EOF"},
	} {
		if _, _, err := Decode(bytes.NewReader(c.file)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.err)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts holds as many
// values as its shape says and is written back by Encode as the same
// array.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	if err := Encode(&buf, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 12)))
	f.Add(header("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", make([]byte, 4)))
	f.Fuzz(func(t *testing.T, file []byte) {
		shape, data, err := Decode(bytes.NewReader(file))
		if err != nil {
			return
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		if n != len(data) {
			t.Fatalf("shape %v with %d values", shape, len(data))
		}
		var out bytes.Buffer
		if err := Encode(&out, shape, data); err != nil {
			t.Fatal(err)
		}
		s2, d2, err := Decode(&out)
		if err != nil || !slices.Equal(s2, shape) || len(d2) != len(data) {
			t.Fatalf("written back as %v (%d values), %v", s2, len(d2), err)
		}
	})
}

// TestDecodeRefusesTrailingBytes: an array followed by more bytes is
// refused, as a truncated one is.
func TestDecodeRefusesTrailingBytes(t *testing.T) {
	var b bytes.Buffer
	if err := Encode(&b, []int{2, 2}, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	b.Write([]byte{0, 0, 128, 63})
	if _, _, err := Decode(&b); err == nil || !strings.Contains(err.Error(), "4 bytes after the 4 values of shape [2 2]") {
		t.Errorf("trailing bytes: %v", err)
	}
}

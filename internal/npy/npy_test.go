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

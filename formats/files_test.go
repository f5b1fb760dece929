package formats

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const sharedData = "../../shared/data"

// realFiles returns the tensor and matrix files of the shared data, or
// skips the test when the folder is absent.
func realFiles(t testing.TB) []string {
	tns, _ := filepath.Glob(filepath.Join(sharedData, "tensors", "*.tns"))
	mtx, _ := filepath.Glob(filepath.Join(sharedData, "suitesparse", "*.mtx"))
	if len(tns)+len(mtx) == 0 {
		t.Skipf("no real data in %s: skipping", sharedData)
	}
	return append(tns, mtx...)
}

func TestReadTNS(t *testing.T) {
	tests := []struct {
		name, in string
		dims     []int
		coords   [][]uint32
		vals     []float32
	}{
		{"plain", "1 2 3 1.5\n2 1 1 -2\n", []int{2, 2, 3}, [][]uint32{{0, 1}, {1, 0}, {2, 0}}, []float32{1.5, -2}},
		{"comments blanks tabs crlf", "# a comment\n\n1\t2 3.0e1 # trailing\r\n   \n2 1 -0.25\r\n", []int{2, 2}, [][]uint32{{0, 1}, {1, 0}}, []float32{30, -0.25}},
		{"no final newline", "3 1 7", []int{3, 1}, [][]uint32{{2}, {0}}, []float32{7}},
		{"header variant", "3\n4 5 6\n1 2 3 1\n", []int{4, 5, 6}, [][]uint32{{0}, {1}, {2}}, []float32{1}},
		{"header no nonzeros", "2\n3 3\n", []int{3, 3}, [][]uint32{{}, {}}, []float32{}},
		{"integers and exponents", "1 1 4\n2 2 1E-3\n", []int{2, 2}, [][]uint32{{0, 1}, {0, 1}}, []float32{4, 0.001}},
		{"max float32", "1 1 3.4028235e+38\n", []int{1, 1}, [][]uint32{{0}, {0}}, []float32{3.4028235e+38}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ReadTNS(strings.NewReader(tc.in), "t.tns")
			if err != nil {
				t.Fatal(err)
			}
			want := &COO{Dims: tc.dims, Inds: tc.coords, Vals: tc.vals}
			if !x.Equal(want) {
				t.Fatalf("got %v %v %v, want %v %v %v", x.Dims, x.Inds, x.Vals, tc.dims, tc.coords, tc.vals)
			}
		})
	}
}

// TestReadErrors checks that malformed input gives one line naming the file
// and line (or offset) and saying what was expected.
func TestReadErrors(t *testing.T) {
	good, _ := NewCOO([]int{4, 5, 6}, 0)
	good.Append([]uint32{0, 1, 2}, 1.5)
	good.Append([]uint32{3, 4, 5}, -2)
	var stb bytes.Buffer
	if err := WriteBinary(&stb, good); err != nil {
		t.Fatal(err)
	}
	bin := stb.Bytes()
	withNNZ := func(b []byte, nnz uint64) string {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint64(b[16:], nnz)
		n := stbFixed + 8*3
		binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
		return string(b)
	}
	flip := func(i int) string {
		b := bytes.Clone(bin)
		b[i] ^= 1
		return string(b)
	}
	tests := []struct {
		name, file, in string
		want           string
	}{
		{"field count", "a.tns", "1 2 3 1.0\n1 2 1.0\n", "a.tns:2: expected 3 indices and a value (4 fields), found 3 fields"},
		{"extra field", "a.tns", "1 2 3 1.0\n1 2 3 1.0 5\n", "a.tns:2: expected 3 indices and a value (4 fields), found 5 fields"},
		{"index 0", "a.tns", "# c\n1 2 3 1.0\n0 2 3 1.0\n", "a.tns:3: mode 1: expected a 1-based index (>= 1), found 0"},
		{"negative index", "a.tns", "1 -2 3 1.0\n", "a.tns:1: mode 2: expected a positive 1-based index, found \"-2\""},
		{"non-numeric index", "a.tns", "1 2 x 1.0\n", "a.tns:1: mode 3: expected an integer index, found \"x\""},
		{"index too large", "a.tns", "1 4294967297 1.0\n", "a.tns:1: mode 2: expected an index of at most " + maxDimText},
		{"beyond declared dim", "a.tns", "3\n2 2 2\n1 3 1 1.0\n", "a.tns:3: mode 2: expected an index of at most 2 (the declared dim), found 3"},
		{"nan", "a.tns", "1 1 NaN\n", "a.tns:1: value: expected a finite value, found \"NaN\""},
		{"inf", "a.tns", "1 1 -inf\n", "a.tns:1: value: expected a finite value"},
		{"float32 overflow", "a.tns", "1 1 1e39\n", "a.tns:1: value: expected a finite float32 value, found \"1e39\""},
		{"bad value", "a.tns", "1 1 1.2.3\n", "a.tns:1: value: expected a numeric value, found \"1.2.3\""},
		{"empty", "a.tns", "", "a.tns: no nonzeros"},
		{"only comments", "a.tns", "# x\n\n", "a.tns: no nonzeros"},
		{"order 1", "a.tns", "1 1.0\n", "a.tns:1: expected at least 2 indices"},
		{"order 9", "a.tns", "1 1 1 1 1 1 1 1 1 1.0\n", "a.tns:1: expected at most 8 indices"},
		{"header dims count", "a.tns", "3\n2 2\n", "a.tns:2: expected 3 dims"},
		{"header dims overflow", "a.tns", "8\n" + strings.Repeat(maxDimText+" ", 8) + "\n", "a.tns:2: product of dims"},
		{"header dim too large", "a.tns", "2\n4294967297 3\n", "a.tns:2: expected dims of at most " + maxDimText},
		{"mtx banner", "m.mtx", "%%MatrixMarket matrix coordinate\n", "m.mtx:1: expected the banner"},
		{"mtx complex", "m.mtx", "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "m.mtx:1: expected a real, integer or pattern field, found complex"},
		{"mtx array", "m.mtx", "%%MatrixMarket matrix array real general\n1 1\n1\n", "m.mtx:1: expected a coordinate (sparse) matrix, found \"array\""},
		{"mtx hermitian", "m.mtx", "%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n", "found hermitian"},
		{"mtx beyond size", "m.mtx", "%%MatrixMarket matrix coordinate real general\n% c\n2 2 1\n3 1 1.0\n", "m.mtx:4: row: expected an index of at most 2 (the size line), found 3"},
		{"mtx too few", "m.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n", "m.mtx:4: expected 2 entries (the size line), found 1"},
		{"mtx too many", "m.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n2 2 1.0\n", "m.mtx:4: expected 1 entry (the size line), found more"},
		{"mtx nan", "m.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 nan\n", "m.mtx:3: value: expected a finite value"},
		{"mtx skew diagonal", "m.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 2\n", "m.mtx:3: expected no diagonal entries"},
		{"mtx symmetric not square", "m.mtx", "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 2\n", "m.mtx:2: expected a square symmetric matrix"},
		{"mtx empty", "m.mtx", "", "m.mtx: no nonzeros"},
		{"stb empty", "b.stb", "", "b.stb: offset 0: truncated"},
		{"stb magic", "b.stb", "not a tensor at all, really", "b.stb: offset 0: expected the .stb magic"},
		{"stb version", "b.stb", flip(8), "b.stb: offset 8: unsupported format version 0, this build reads 1"},
		{"stb truncated", "b.stb", string(bin[:len(bin)-7]), "truncated"},
		{"stb truncated header", "b.stb", string(bin[:30]), "b.stb: offset 30: truncated"},
		{"stb corrupted value", "b.stb", flip(len(bin) - 6), "checksum mismatch"},
		{"stb corrupted header", "b.stb", flip(16), "header checksum mismatch"},
		// A header that is consistent but lies about nnz: refused by size
		// (plain file) or as truncated (gzip), never allocated.
		{"stb huge nnz", "b.stb", withNNZ(bin, MaxNNZ), "b.stb: offset 16: header says " + maxNNZText + " nonzeros"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(path)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, path) || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q, want one line starting with the path and containing %q", msg, tc.want)
			}
			// The same bytes gzipped fail the same way.
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write([]byte(tc.in))
			zw.Close()
			if err := os.WriteFile(path+".gz", z.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadFile(path + ".gz"); err == nil {
				t.Fatal("gzipped copy accepted")
			} else if strings.HasPrefix(tc.name, "stb") && !strings.Contains(err.Error(), path+".gz: offset") {
				t.Fatalf("gzipped copy: %v", err)
			}
		})
	}
}

func TestFileFormatErrors(t *testing.T) {
	dir := t.TempDir()
	x := genCOO(rand.New(rand.NewPCG(1, 2)), []int{3, 4, 5}, 10)
	for _, tc := range []struct{ path, want string }{
		{"x.csv", "unknown tensor file extension"},
		{"x.mtx", "expected an order-2 tensor"},
		{"nodir/x.tns", "no such file"},
	} {
		err := WriteFile(filepath.Join(dir, tc.path), x)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WriteFile(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	bad := x.Clone()
	bad.Inds[1][3] = 99
	if err := WriteFile(filepath.Join(dir, "bad.stb"), bad); err == nil {
		t.Error("wrote an invalid tensor")
	}
	if _, err := ReadFile(filepath.Join(dir, "absent.tns")); err == nil || !strings.Contains(err.Error(), "absent.tns") {
		t.Errorf("reading a missing file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain.tns.gz"), []byte("1 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(filepath.Join(dir, "plain.tns.gz")); err == nil || !strings.Contains(err.Error(), "expected a gzip stream") {
		t.Errorf("reading a non-gzip .gz: %v", err)
	}
	// A gzip stream cut short: the text reader inside sees a bare
	// "unexpected EOF", which must name the file.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if err := WriteTNS(zw, x); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "cut.tns.gz"), z.Bytes()[:z.Len()/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(filepath.Join(dir, "cut.tns.gz")); err == nil || !strings.Contains(err.Error(), "cut.tns.gz: truncated gzip stream") {
		t.Errorf("reading a truncated .tns.gz: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") || strings.HasPrefix(e.Name(), "bad") || strings.HasPrefix(e.Name(), "x.") {
			t.Errorf("failed write left %s behind", e.Name())
		}
	}
}

// TestWriteFailureLeavesNothing writes to a full device: the write fails and
// neither the output nor a temporary file remains.
func TestWriteFailureLeavesNothing(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	x := genCOO(rand.New(rand.NewPCG(1, 2)), []int{30, 40, 50}, 1000)
	// A writer that fails halfway stands in for a full disk inside WriteTNS.
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if err := WriteBinary(f, x); err == nil {
		t.Fatal("writing to /dev/full succeeded")
	}
	// And through WriteFile, an output directory that vanishes before the
	// rename leaves nothing.
	dir := filepath.Join(t.TempDir(), "gone")
	os.Mkdir(dir, 0o755)
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o755)
	if os.Geteuid() != 0 { // root ignores the permission bits
		if err := WriteFile(filepath.Join(dir, "x.tns"), x); err == nil {
			t.Fatal("wrote into a read-only directory")
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("left %v behind", entries)
		}
	}
}

// TestRealRoundTrip reads every shared data file and writes it back in every
// file format, requiring the exact same tensor back. Streams are used for
// most formats to keep the test fast (WriteFile syncs); the file path, with
// gzip, is taken for .stb.gz.
func TestRealRoundTrip(t *testing.T) {
	dir := t.TempDir()
	type codec struct {
		ext   string
		write func(io.Writer, *COO) error
		read  func(io.Reader, string) (*COO, error)
	}
	codecs := []codec{
		{".tns", WriteTNS, ReadTNS},
		{".stb", WriteBinary, func(r io.Reader, name string) (*COO, error) { return ReadBinary(r, name, -1) }},
		{".mtx", WriteMTX, ReadMTX},
	}
	for _, path := range realFiles(t) {
		x, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Validate(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, c := range codecs {
			if c.ext == ".mtx" && x.Order() != 2 {
				continue
			}
			var buf bytes.Buffer
			if err := c.write(&buf, x); err != nil {
				t.Fatal(err)
			}
			y, err := c.read(&buf, path+c.ext)
			if err != nil {
				t.Fatal(err)
			}
			if !y.Equal(x) {
				t.Fatalf("%s: round trip through %s changed the tensor", path, c.ext)
			}
		}
		if x.Order() == 2 {
			continue // the file path is exercised on the tensors
		}
		out := filepath.Join(dir, "x.stb.gz")
		if err := WriteFile(out, x); err != nil {
			t.Fatal(err)
		}
		if y, err := ReadFile(out); err != nil || !y.Equal(x) {
			t.Fatalf("%s: round trip through .stb.gz: %v", path, err)
		}
	}
}

// TestRandomRoundTrip round-trips random tensors of every order, including
// ones whose dims the indices do not reach (the .tns header variant).
func TestRandomRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	dir := t.TempDir()
	for order := MinOrder; order <= MaxOrder; order++ {
		dims := make([]int, order)
		for m := range dims {
			dims[m] = 1 + rng.IntN(1000)
		}
		x := genCOO(rng, dims, rng.IntN(500))
		for k := range x.Vals {
			switch k % 4 {
			case 1:
				x.Vals[k] = float32(rng.IntN(5))
			case 2:
				x.Vals[k] *= 1e-30
			}
		}
		for _, ext := range []string{".tns", ".stb", ".tns.gz"} {
			out := filepath.Join(dir, "r"+ext)
			if err := WriteFile(out, x); err != nil {
				t.Fatal(err)
			}
			y, err := ReadFile(out)
			if err != nil {
				t.Fatalf("order %d %s: %v", order, ext, err)
			}
			if !y.Equal(x) {
				t.Fatalf("order %d: round trip through %s changed the tensor", order, ext)
			}
		}
	}
}

func TestSymmetricExpansion(t *testing.T) {
	in := "%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 2\n2 1 5\n3 2 -1\n"
	x, err := ReadMTX(strings.NewReader(in), "s.mtx")
	if err != nil {
		t.Fatal(err)
	}
	want := &COO{Dims: []int{3, 3}, Inds: [][]uint32{{1, 0, 2, 1}, {0, 1, 1, 2}}, Vals: []float32{5, -5, -1, 1}}
	if !x.Equal(want) {
		t.Fatalf("got %v %v", x.Inds, x.Vals)
	}
	in = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n1 1\n3 1\n"
	x, err = ReadMTX(strings.NewReader(in), "p.mtx")
	if err != nil {
		t.Fatal(err)
	}
	want = &COO{Dims: []int{3, 3}, Inds: [][]uint32{{0, 2, 0}, {0, 0, 2}}, Vals: []float32{1, 1, 1}}
	if !x.Equal(want) {
		t.Fatalf("got %v %v", x.Inds, x.Vals)
	}
}

// collect runs the garbage collector outside the timed region, so each
// load is timed as a program's first load is, not taxed by collecting the
// previous iteration's tensor (which dominates a 10 ms binary load).
func collect(b *testing.B) {
	b.StopTimer()
	runtime.GC()
	b.StartTimer()
}

// BenchmarkReadTNS reports the .tns parse rate in MB/s on the largest
// shared tensor and on a generated 50 MB text.
func BenchmarkReadTNS(b *testing.B) {
	inputs := map[string][]byte{}
	if data, err := os.ReadFile(filepath.Join(sharedData, "tensors", "splatt_med4.tns")); err == nil {
		inputs["splatt_med4"] = data
	}
	var gen bytes.Buffer
	WriteTNS(&gen, genCOO(rand.New(rand.NewPCG(1, 1)), []int{100000, 50000, 2000}, 2_000_000))
	inputs["generated"] = gen.Bytes()
	for name, data := range inputs {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for range b.N {
				collect(b)
				if _, err := ReadTNS(bytes.NewReader(data), name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadBinary loads the same tensors from .stb; compare its ns/op
// with BenchmarkReadTNS for the binary speed-up.
func BenchmarkReadBinary(b *testing.B) {
	inputs := map[string]*COO{"generated": genCOO(rand.New(rand.NewPCG(1, 1)), []int{100000, 50000, 2000}, 2_000_000)}
	if x, err := ReadFile(filepath.Join(sharedData, "tensors", "splatt_med4.tns")); err == nil {
		inputs["splatt_med4"] = x
	}
	for name, x := range inputs {
		var buf bytes.Buffer
		WriteBinary(&buf, x)
		data := buf.Bytes()
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for range b.N {
				collect(b)
				if _, err := ReadBinary(bytes.NewReader(data), name, int64(len(data))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A file that lists a coordinate twice reads as one nonzero holding the
// sum, so the density of a tensor never exceeds 1.
func TestReadFileSumsDuplicates(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, text string }{
		{"dup.tns", "1 1 1 2.5\n1 1 1 0.5\n"},
		{"dup.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 3\n2 1 1\n1 2 4\n2 1 2\n"},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		x, summed, err := ReadFileSummed(path)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if summed != 1 || x.Density() > 1 || x.Duplicates() != 0 {
			t.Errorf("%s: summed %d, density %g, %d duplicates left; want 1, <= 1, 0", c.name, summed, x.Density(), x.Duplicates())
		}
		var total float32
		for _, v := range x.Vals {
			total += v
		}
		if want := map[string]float32{"dup.tns": 3, "dup.mtx": 7}[c.name]; total != want {
			t.Errorf("%s: values sum to %g, want %g", c.name, total, want)
		}
	}
}

// A directory where a tensor file is expected is named as one, once.
func TestReadFileDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x.tns")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(dir)
	if err == nil || err.Error() != dir+": is a directory, expected a tensor file" {
		t.Errorf("error %v", err)
	}
}

// A UTF-8 byte order mark before a text file's first line is skipped, as
// the editors that write one expect; the tensor is the one without it.
func TestReadFileBOM(t *testing.T) {
	dir := t.TempDir()
	bom := "\xef\xbb\xbf"
	for name, text := range map[string]string{
		"a.tns": "1 2 3 1.5\n2 2 2 -1\n",
		"b.mtx": "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 2 1.5\n2 3 -1\n",
	} {
		plain := filepath.Join(dir, name)
		if err := os.WriteFile(plain, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		want, err := ReadFile(plain)
		if err != nil {
			t.Fatal(err)
		}
		for _, gz := range []bool{false, true} {
			path := filepath.Join(dir, "bom-"+name)
			data := []byte(bom + text)
			if gz {
				path += ".gz"
				var b bytes.Buffer
				w := gzip.NewWriter(&b)
				w.Write(data)
				w.Close()
				data = b.Bytes()
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(path)
			if err != nil || !got.Equal(want) {
				t.Errorf("%s: %v, %v; want %v", path, got, err, want)
			}
		}
	}
}

// "-" reads the standard input, in the format its first bytes show, gzip
// included: the same tensor as the file it came from.
func TestReadStdin(t *testing.T) {
	dir := t.TempDir()
	x := genCOO(rand.New(rand.NewPCG(3, 3)), []int{7, 8, 9}, 60)
	if _, err := x.SumDuplicates(); err != nil {
		t.Fatal(err)
	}
	m := genCOO(rand.New(rand.NewPCG(4, 4)), []int{5, 6}, 12)
	if _, err := m.SumDuplicates(); err != nil {
		t.Fatal(err)
	}
	read := func(path string) (*COO, error) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		saved := os.Stdin
		os.Stdin = f
		defer func() { os.Stdin = saved }()
		return ReadFile(Stdin)
	}
	for _, name := range []string{"x.tns", "x.tns.gz", "x.stb", "x.stb.gz", "m.mtx", "m.mtx.gz"} {
		want := x
		if name[0] == 'm' {
			want = m
		}
		path := filepath.Join(dir, name)
		if err := WriteFile(path, want); err != nil {
			t.Fatal(err)
		}
		got, err := read(path)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s through stdin: %v", name, err)
		}
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("1 2 3 1.0\n1 2 x 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := read(bad); err == nil || !strings.HasPrefix(err.Error(), "stdin:2: ") {
		t.Errorf("bad text through stdin: %v", err)
	}
}

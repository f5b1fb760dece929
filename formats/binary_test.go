package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// Tests of the .stb binary format beyond TestReadErrors (files_test.go):
// the layout byte for byte, every truncation and every single-bit flip,
// headers and payloads that are consistent (valid checksums) but describe
// an invalid tensor, and the memory a lying header can cost.

// stbBytes builds a .stb stream by hand from the documented layout, with
// valid checksums, whatever the header says.
func stbBytes(version uint16, dims []uint64, nnz uint64, arrays [][]uint32) []byte {
	b := []byte(stbMagic)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dims)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, nnz)
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	var sums []byte
	for _, a := range arrays {
		start := len(b)
		for _, v := range a {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		sums = binary.LittleEndian.AppendUint32(sums, crc32.Checksum(b[start:], castagnoli))
	}
	return append(b, sums...)
}

// TestSTBLayout pins the layout documented in stb.go: WriteBinary must
// produce exactly what stbBytes builds from the documentation.
func TestSTBLayout(t *testing.T) {
	x := &COO{Dims: []int{4, 5, 6}, Inds: [][]uint32{{0, 3}, {1, 4}, {2, 5}}, Vals: []float32{1.5, -2}}
	var b bytes.Buffer
	if err := WriteBinary(&b, x); err != nil {
		t.Fatal(err)
	}
	want := stbBytes(1, []uint64{4, 5, 6}, 2, [][]uint32{{0, 3}, {1, 4}, {2, 5},
		{math.Float32bits(1.5), math.Float32bits(-2)}})
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("wrote\n% x\nwant\n% x", b.Bytes(), want)
	}
	if len(want) != 24+8*3+4+4*2*3+4*2+4*4 {
		t.Fatalf("layout arithmetic: %d bytes", len(want))
	}
}

// readSTB reads data as a plain file (size known) or as a stream (size
// unknown, read in small pieces as from gzip).
func readSTB(data []byte, sized bool) (*COO, error) {
	if sized {
		return ReadBinary(bytes.NewReader(data), "b.stb", int64(len(data)))
	}
	return ReadBinary(iotest.HalfReader(bytes.NewReader(data)), "b.stb", -1)
}

// TestSTBTruncatedEverywhere cuts a valid file at every length: each must
// be refused with an offset error, never read as a smaller tensor.
func TestSTBTruncatedEverywhere(t *testing.T) {
	x := genCOO(rand.New(rand.NewPCG(1, 1)), []int{7, 8, 9, 10}, 20)
	var b bytes.Buffer
	if err := WriteBinary(&b, x); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	for n := range len(data) {
		for _, sized := range []bool{true, false} {
			_, err := readSTB(data[:n], sized)
			if err == nil {
				t.Fatalf("%d of %d bytes (sized %v) accepted", n, len(data), sized)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "b.stb: offset ") || strings.Contains(msg, "\n") {
				t.Fatalf("%d bytes: error %q, want one line \"b.stb: offset N: ...\"", n, msg)
			}
		}
	}
	for _, sized := range []bool{true, false} {
		y, err := readSTB(data, sized)
		if err != nil || !y.Equal(x) {
			t.Fatalf("whole file (sized %v): %v", sized, err)
		}
		if _, err := readSTB(append(bytes.Clone(data), 0), sized); err == nil {
			t.Fatalf("a trailing byte accepted (sized %v)", sized)
		}
	}
}

// TestSTBBitFlipsEverywhere flips each bit of a valid file: CRC-32C
// detects every single-bit error, so each must be refused.
func TestSTBBitFlipsEverywhere(t *testing.T) {
	x := genCOO(rand.New(rand.NewPCG(2, 2)), []int{30, 40}, 12)
	var b bytes.Buffer
	if err := WriteBinary(&b, x); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	for i := range len(data) {
		for bit := range 8 {
			c := bytes.Clone(data)
			c[i] ^= 1 << bit
			for _, sized := range []bool{true, false} {
				if _, err := readSTB(c, sized); err == nil {
					t.Fatalf("flip of bit %d of byte %d accepted (sized %v)", bit, i, sized)
				} else if !strings.HasPrefix(err.Error(), "b.stb: offset ") {
					t.Fatalf("flip at %d: %v", i, err)
				}
			}
		}
	}
}

// TestSTBConsistentButInvalid gives headers and arrays whose checksums are
// right but whose content is not a valid tensor.
func TestSTBConsistentButInvalid(t *testing.T) {
	one := math.Float32bits(1)
	nan := math.Float32bits(float32(math.NaN()))
	inf := math.Float32bits(float32(math.Inf(-1)))
	big := uint64(1) << 32
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"version 2", stbBytes(2, []uint64{2, 2}, 0, [][]uint32{{}, {}, {}}), "b.stb: offset 8: unsupported format version 2, this build reads 1"},
		{"order 1", stbBytes(1, []uint64{2}, 0, [][]uint32{{}, {}}), "b.stb: offset 10: expected an order of 2 to 8, found 1"},
		{"order 9", stbBytes(1, []uint64{2, 2, 2, 2, 2, 2, 2, 2, 2}, 0, nil), "b.stb: offset 10: expected an order of 2 to 8, found 9"},
		{"dim 0", stbBytes(1, []uint64{2, 0}, 0, [][]uint32{{}, {}, {}}), "b.stb: offset 32: expected dim of mode 2 to be 1 to " + maxDimText + ", found 0"},
		{"dim beyond 2^32", stbBytes(1, []uint64{big + 1, 2}, 0, [][]uint32{{}, {}, {}}), "b.stb: offset 24: expected dim of mode 1 to be 1 to " + maxDimText + ", found 4294967297"},
		{"dims product overflows", stbBytes(1, []uint64{MaxDim, MaxDim, MaxDim, MaxDim, MaxDim, MaxDim, MaxDim, MaxDim}, 0, nil), "b.stb: offset 24: product of dims"},
		{"nnz beyond limit", stbBytes(1, []uint64{2, 2}, 1<<32, [][]uint32{{}, {}, {}}), "b.stb: offset 16: expected at most " + maxNNZText + " nonzeros, found 4294967296"},
		{"index equals dim", stbBytes(1, []uint64{3, 2}, 2, [][]uint32{{0, 1}, {1, 2}, {one, one}}), "b.stb: offset 56: mode 2: expected an index below the dim 2, found 2 (0-based)"},
		{"nan value", stbBytes(1, []uint64{3, 2}, 2, [][]uint32{{0, 1}, {1, 1}, {one, nan}}), "b.stb: offset 64: expected a finite value, found NaN"},
		{"inf value", stbBytes(1, []uint64{3, 2}, 2, [][]uint32{{0, 1}, {1, 1}, {inf, one}}), "b.stb: offset 60: expected a finite value, found -Inf"},
		{"bad magic", append([]byte("SPTNSR\x00\x1b"), make([]byte, 40)...), "b.stb: offset 0: expected the .stb magic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, sized := range []bool{true, false} {
				_, err := readSTB(tc.data, sized)
				if err == nil {
					t.Fatalf("accepted (sized %v)", sized)
				}
				if msg := err.Error(); !strings.HasPrefix(msg, tc.want) || strings.Contains(msg, "\n") {
					t.Fatalf("sized %v: error %q, want one line starting %q", sized, msg, tc.want)
				}
			}
		})
	}
}

// TestSTBLyingHeaderCostsLittle reads a header that promises 2^32-1
// nonzeros of order 8 (154 GB) followed by a few bytes, from a stream of
// unknown size: it must fail as truncated having allocated little, not
// attempt the 154 GB.
func TestSTBLyingHeaderCostsLittle(t *testing.T) {
	dims := []uint64{1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16}
	data := stbBytes(1, dims, MaxNNZ, nil)
	data = append(data, make([]byte, 1000)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readSTB(data, false)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("error %v, want truncated", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("allocated %d bytes for a 1 KB stream", got)
	}
	// With the size known, the header is refused before any array is read.
	if _, err := readSTB(data, true); err == nil || !strings.Contains(err.Error(), "b.stb: offset 16: header says "+maxNNZText+" nonzeros of order 8") {
		t.Fatalf("sized: %v", err)
	}
}

// TestSTBEmptyTensor round-trips a tensor without nonzeros.
func TestSTBEmptyTensor(t *testing.T) {
	x, _ := NewCOO([]int{3, MaxDim}, 0)
	var b bytes.Buffer
	if err := WriteBinary(&b, x); err != nil {
		t.Fatal(err)
	}
	for _, sized := range []bool{true, false} {
		y, err := readSTB(b.Bytes(), sized)
		if err != nil || !y.Equal(x) {
			t.Fatalf("sized %v: %v", sized, err)
		}
	}
}

// BenchmarkLoadFile loads the same tensor from a .tns and from a .stb file
// through ReadFile (the page cache warm after the first iteration): the
// ratio of their ns/op is the binary format's load speed-up as a user sees
// it. Inputs: the largest shared tensor and a generated 2 M nonzero one.
func BenchmarkLoadFile(b *testing.B) {
	inputs := map[string]*COO{"generated": genCOO(rand.New(rand.NewPCG(1, 1)), []int{100000, 50000, 2000}, 2_000_000)}
	if x, err := ReadFile(sharedData + "/tensors/splatt_med4.tns"); err == nil {
		inputs["splatt_med4"] = x
	}
	dir := b.TempDir()
	for name, x := range inputs {
		for _, ext := range []string{".tns", ".stb"} {
			path := dir + "/" + name + ext
			if err := WriteFile(path, x); err != nil {
				b.Fatal(err)
			}
			b.Run(name+ext, func(b *testing.B) {
				for range b.N {
					collect(b)
					if _, err := ReadFile(path); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestSTBReadAtPieces reads a file of several pieces per array on one to
// five workers by pread (readBinaryAt) and as a stream, and holds both
// to the same tensor and, for a corrupted or faulty file, to the same
// error: the checksums of the workers' runs combined in file order, an
// array's checksum mismatch before bad content in it, the earliest bad
// content first.
func TestSTBReadAtPieces(t *testing.T) {
	x := genCOO(rand.New(rand.NewPCG(3, 4)), []int{300, 200, 100}, 3*stbCheckPiece+1234)
	arrays := stbArrays(x)
	dims := []uint64{300, 200, 100}
	nnz := uint64(x.NNZ())
	good := stbBytes(1, dims, nnz, arrays)
	hdr := 24 + 8*len(dims) + 4
	// A byte of mode 2's indices flipped in the last piece: a checksum
	// mismatch in mode 2, although mode 3 below holds bad content too.
	corrupt := slices.Clone(good)
	corrupt[hdr+4*x.NNZ()+4*(x.NNZ()-10)] ^= 0x40
	// Indices of mode 3 beyond its dim under valid checksums (a faulty
	// writer), in the third piece and then the second: the second
	// piece's is reported.
	faulty := slices.Clone(arrays)
	faulty[2] = slices.Clone(arrays[2])
	faulty[2][2*stbCheckPiece+5] = 100
	faulty[2][stbCheckPiece+7] = 1000
	faultyBytes := stbBytes(1, dims, nnz, faulty)
	corrupt3 := slices.Clone(faultyBytes)
	corrupt3[hdr+4*x.NNZ()+100] ^= 1 // and mode 2 corrupted before it
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3, 5} {
		runtime.GOMAXPROCS(procs)
		got, err := readSTB(good, true)
		if err != nil {
			t.Fatalf("%d workers: %v", procs, err)
		}
		if !got.Equal(x) {
			t.Fatalf("%d workers: read another tensor", procs)
		}
		for _, c := range []struct {
			name, want string
			data       []byte
		}{
			{"corrupt", "checksum mismatch in the mode 2 indices", corrupt},
			{"faulty", fmt.Sprintf("offset %d: mode 3: expected an index below the dim 100, found 1000", hdr+4*2*x.NNZ()+4*(stbCheckPiece+7)), faultyBytes},
			{"corrupt before faulty", "checksum mismatch in the mode 2 indices", corrupt3},
		} {
			_, errAt := readSTB(c.data, true)
			_, errSeq := readSTB(c.data, false)
			if errAt == nil || errSeq == nil || !strings.Contains(errAt.Error(), c.want) || errAt.Error() != errSeq.Error() {
				t.Errorf("%d workers, %s: pread %v, stream %v, want both to say %q", procs, c.name, errAt, errSeq, c.want)
			}
		}
	}
}

// TestSTBArraysApart: the arrays a sized read cuts from one allocation
// end where the next begins, so appending to one reallocates it and
// leaves the others as they were.
func TestSTBArraysApart(t *testing.T) {
	x := genCOO(rand.New(rand.NewPCG(5, 6)), []int{30, 20, 10}, 500)
	got, err := readSTB(stbBytes(1, []uint64{30, 20, 10}, uint64(x.NNZ()), stbArrays(x)), true)
	if err != nil {
		t.Fatal(err)
	}
	for m := range got.Inds {
		if cap(got.Inds[m]) != got.NNZ() {
			t.Fatalf("mode %d: capacity %d for %d nonzeros", m+1, cap(got.Inds[m]), got.NNZ())
		}
	}
	if cap(got.Vals) != got.NNZ() {
		t.Fatalf("values: capacity %d for %d nonzeros", cap(got.Vals), got.NNZ())
	}
	for m := range got.Inds {
		got.Inds[m] = append(got.Inds[m], 7)
	}
	got.Vals = append(got.Vals, 7)
	for m := range got.Inds {
		if !slices.Equal(got.Inds[m][:x.NNZ()], x.Inds[m]) {
			t.Fatalf("mode %d changed by the appends", m+1)
		}
	}
	if !slices.Equal(got.Vals[:x.NNZ()], x.Vals) {
		t.Fatal("values changed by the appends")
	}
}

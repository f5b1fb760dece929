package formats

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/internal/warm"
)

// These tests cover what TestReadTNS and TestReadErrors (files_test.go) do
// not: the block machinery of the parallel parser (lines and headers that
// straddle block boundaries, line numbers of errors in late blocks), the
// exactness of the value fast path against strconv, and the writer's text.

// tnsText writes x as .tns text decorated the way real files are: comment
// lines, blank lines, tabs, CRLF line ends and trailing comments, chosen by
// rng. It returns the text and, for each nonzero, its 1-based line number.
func tnsText(rng *rand.Rand, x *COO) ([]byte, []int) {
	var b []byte
	lines := make([]int, x.NNZ())
	line := 1
	b = append(b, "# generated\n"...)
	line++
	for k := range x.NNZ() {
		switch rng.IntN(50) {
		case 0:
			b = append(b, "# a comment line\n"...)
			line++
		case 1:
			b = append(b, " \t\n"...)
			line++
		}
		for m := range x.Inds {
			if m > 0 && rng.IntN(4) == 0 {
				b = append(b, '\t')
			} else if m > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendUint(b, uint64(x.Inds[m][k])+1, 10)
		}
		b = append(b, ' ')
		b = strconv.AppendFloat(b, float64(x.Vals[k]), 'g', -1, 32)
		switch rng.IntN(20) {
		case 0:
			b = append(b, " # trailing"...)
		case 1:
			b = append(b, '\r')
		}
		b = append(b, '\n')
		lines[k] = line
		line++
	}
	return b, lines
}

// TestTNSBlockBoundaries parses texts large enough to span many blocks (the
// first blocks are 64 KiB, later ones 4 MiB) and checks the result against
// the tensor that produced the text, then plants a bad line at positions
// all over the text and checks that the error names exactly that line.
func TestTNSBlockBoundaries(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	nnz := 400_000
	if testing.Short() {
		nnz = 100_000
	}
	x := genCOO(rng, []int{1000, 70000, 3}, nnz)
	// Make the dims inferable so the text round-trips without a header.
	x.Append([]uint32{999, 69999, 2}, 1)
	text, lines := tnsText(rng, x)
	y, err := ReadTNS(bytes.NewReader(text), "big.tns")
	if err != nil {
		t.Fatal(err)
	}
	if !y.Equal(x) {
		t.Fatalf("parsed tensor differs from the written one: dims %v nnz %d, want %v %d", y.Dims, y.NNZ(), x.Dims, x.NNZ())
	}
	for _, k := range []int{0, 1, 1000, 4000, 4001, nnz / 3, nnz / 2, nnz - 1, nnz} {
		bad := bytes.Clone(text)
		// Find the start of the line of nonzero k and overwrite its first
		// index with a zero (same length, so offsets stay put).
		pos := lineStart(bad, lines[k])
		if bad[pos] < '1' || bad[pos] > '9' {
			t.Fatalf("line %d does not start with an index: %q", lines[k], bad[pos:pos+10])
		}
		bad[pos] = '0'
		for q := pos + 1; bad[q] >= '0' && bad[q] <= '9'; q++ {
			bad[q] = '0'
		}
		_, err := ReadTNS(bytes.NewReader(bad), "big.tns")
		want := fmt.Sprintf("big.tns:%d: mode 1: expected a 1-based index (>= 1), found 0", lines[k])
		if err == nil || err.Error() != want {
			t.Fatalf("nonzero %d: error %v, want %q", k, err, want)
		}
	}
}

// lineStart returns the offset of 1-based line n of b.
func lineStart(b []byte, n int) int {
	pos := 0
	for range n - 1 {
		pos += bytes.IndexByte(b[pos:], '\n') + 1
	}
	return pos
}

// TestTNSHeaderAtBlockEdge puts the order line of the header variant, and
// then the dims line, right at the end of the first block (64 KiB) after a
// long run of comments, so the header is split between two blocks.
func TestTNSHeaderAtBlockEdge(t *testing.T) {
	const block = 64 << 10
	for _, shift := range []int{-12, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 8} {
		t.Run(strconv.Itoa(shift), func(t *testing.T) {
			head := "3\n10 20 30\n"
			var b strings.Builder
			// Comment lines until the header starts at block+shift-len("3\n").
			target := block + shift - 2
			for b.Len() < target {
				n := min(target-b.Len(), 80)
				if n < 2 {
					// Too little room for "#\n": lengthen the previous line.
					s := b.String()
					b.Reset()
					b.WriteString(s[:len(s)-1] + strings.Repeat("x", n) + "\n")
					continue
				}
				b.WriteString("#" + strings.Repeat("-", n-2) + "\n")
			}
			commentLines := strings.Count(b.String(), "\n")
			b.WriteString(head)
			b.WriteString("1 2 3 1.5\n10 20 30 -1\n")
			x, err := ReadTNS(strings.NewReader(b.String()), "h.tns")
			if err != nil {
				t.Fatalf("header at offset %d: %v", target, err)
			}
			want := &COO{Dims: []int{10, 20, 30}, Inds: [][]uint32{{0, 9}, {1, 19}, {2, 29}}, Vals: []float32{1.5, -1}}
			if !x.Equal(want) {
				t.Fatalf("got %v %v %v", x.Dims, x.Inds, x.Vals)
			}
			// And an index beyond the declared dims names the right line.
			bad := strings.Replace(b.String(), "10 20 30 -1", "10 21 30 -1", 1)
			_, err = ReadTNS(strings.NewReader(bad), "h.tns")
			wantErr := fmt.Sprintf("h.tns:%d: mode 2: expected an index of at most 20 (the declared dim), found 21", commentLines+4)
			if err == nil || err.Error() != wantErr {
				t.Fatalf("error %v, want %q", err, wantErr)
			}
		})
	}
}

// TestTNSLongLine reads a line longer than a block (a comment of 5 MiB)
// between nonzeros.
func TestTNSLongLine(t *testing.T) {
	text := "1 1 1\n#" + strings.Repeat("c", 5<<20) + "\n2 2 2\n3 x 1\n"
	_, err := ReadTNS(strings.NewReader(text), "l.tns")
	if want := "l.tns:4: mode 2: expected an integer index, found \"x\""; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestTNSKeepsDuplicates checks that the reader neither deduplicates nor
// reorders: nnz is the number of data lines.
func TestTNSKeepsDuplicates(t *testing.T) {
	x, err := ReadTNS(strings.NewReader("2 2 1\n1 1 2\n2 2 3\n2 2 1\n"), "d.tns")
	if err != nil {
		t.Fatal(err)
	}
	want := &COO{Dims: []int{2, 2}, Inds: [][]uint32{{1, 0, 1, 1}, {1, 0, 1, 1}}, Vals: []float32{1, 2, 3, 1}}
	if !x.Equal(want) {
		t.Fatalf("got %v %v", x.Inds, x.Vals)
	}
}

// TestTNSMoreErrors complements TestReadErrors with messages checked in
// full and with inputs at the limits.
func TestTNSMoreErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"wrong field count later", "1 1 1\n\n# c\n1 1 1 1\n", "e.tns:4: expected 2 indices and a value (3 fields), found 4 fields"},
		{"missing value", "1 1 1 1\n1 1 1\n", "e.tns:2: expected 3 indices and a value (4 fields), found 3 fields"},
		{"index 0 last mode", "1 1 1\n1 0 1\n", "e.tns:2: mode 2: expected a 1-based index (>= 1), found 0"},
		{"index 2^32+1", "1 4294967297 1\n", "e.tns:1: mode 2: expected an index of at most " + maxDimText + ", found \"4294967297\""},
		{"huge index", "99999999999999999999999 1 1\n", "e.tns:1: mode 1: expected an index of at most " + maxDimText},
		{"float index", "1.5 1 1\n", "e.tns:1: mode 1: expected an integer index, found \"1.5\""},
		// Indices after the first are read by a one-pass fast path; what
		// it does not take gets the general path's message.
		{"float index, mode 2", "1 2.5 1\n", "e.tns:1: mode 2: expected an integer index, found \"2.5\""},
		{"negative index, mode 3", "1 1 -2 1\n", "e.tns:1: mode 3: expected a positive 1-based index, found \"-2\""},
		{"comment glued to an index", "1 2#x 1\n", "e.tns:1: mode 2: expected an integer index, found \"2#x\""},
		{"above the declared dim, mode 2", "2\n3 4\n1 5 1\n", "e.tns:3: mode 2: expected an index of at most 4 (the declared dim), found 5"},
		{"at the declared dim, mode 2", "2\n3 4\n1 4 1\n", ""},
		{"eleven digits, mode 2", "1 00000000001 1\n", ""},
		{"nan lower", "1 1 nan\n", "e.tns:1: value: expected a finite value, found \"nan\""},
		{"inf", "1 1 inf\n", "e.tns:1: value: expected a finite value, found \"inf\""},
		{"+Infinity", "1 1 +Infinity\n", "e.tns:1: value: expected a finite value, found \"+Infinity\""},
		{"float32 overflow negative", "1 1 -1e39\n", "e.tns:1: value: expected a finite float32 value, found \"-1e39\""},
		{"just above max float32", "1 1 3.4028236e38\n", "e.tns:1: value: expected a finite float32 value, found \"3.4028236e38\""},
		{"float64 overflow", "1 1 1e400\n", "e.tns:1: value: expected a finite float32 value, found \"1e400\" (out of range)"},
		{"float32 underflow", "1 1 1.0\n2 2 1e-300\n", "e.tns:2: value: expected a float32 value, found \"1e-300\" (below float32's smallest, 1.4e-45: it would read as 0)"},
		{"float32 underflow, negative", "1 1 -2.5e-46\n", "e.tns:1: value: expected a float32 value, found \"-2.5e-46\" (below float32's smallest"},
		{"float64 underflow", "1 1 1e-400\n", "e.tns:1: value: expected a float32 value, found \"1e-400\" (below float32's smallest"},
		{"hex underflow", "1 1 0x1p-200\n", "e.tns:1: value: expected a float32 value, found \"0x1p-200\" (below float32's smallest"},
		{"hex value", "1 1 0x1p3\n", ""}, // strconv accepts hex floats; allowed
		{"value with junk", "1 1 1.0abc\n", "e.tns:1: value: expected a numeric value, found \"1.0abc\""},
		{"header order 9", "9\n", "e.tns:1: expected 2 to 8 indices and a value, or a header line with the order (2 to 8), found \"9\""},
		{"header order text", "x\n", "e.tns:1: expected 2 to 8 indices and a value, or a header line with the order (2 to 8), found \"x\""},
		{"header no dims", "3\n# c\n\n", "e.tns:4: expected the dims line of 3 dims after the order line, found the end of the file"},
		{"header dim 0", "2\n3 0\n", "e.tns:2: expected a positive integer dim, found \"0\""},
		{"header negative dim", "2\n3 -4\n", "e.tns:2: expected a positive integer dim, found \"-4\""},
		{"header wrong field count", "2\n3 3\n1 1 1 1\n", "e.tns:3: expected 2 indices and a value (3 fields), found 4 fields"},
		{"inferred dims at 128 bits", strings.Repeat(maxDimText+" ", 4) + "1\n", ""},
		{"inferred dims overflow 8 modes", strings.Repeat(maxDimText+" ", 8) + "1\n",
			"e.tns: product of dims " + strings.Repeat(maxDimText+"x", 7) + maxDimText + " overflows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ReadTNS(strings.NewReader(tc.in), "e.tns")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if err := x.Validate(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: dims %v", x.Dims)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, tc.want) {
				t.Fatalf("error %q, want one line starting %q", msg, tc.want)
			}
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error is a %T, want *ParseError", err)
			}
		})
	}
}

// TestTNSValueFastPath compares the reader's values with strconv's
// correctly rounded float32 parse on random decimals of every shape the
// fast path takes (and some it does not).
func TestTNSValueFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	for range n {
		var s string
		switch rng.IntN(5) {
		case 0: // short decimals as in real files
			s = strconv.FormatFloat(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(12)-6)), 'f', rng.IntN(8), 64)
		case 1: // shortest float32 forms, what WriteTNS writes
			s = strconv.FormatFloat(float64(math.Float32frombits(rng.Uint32()&0x7f7fffff)), 'g', -1, 32)
		case 2: // many digits, exponents at the edge of the fast path
			s = strconv.FormatFloat(rng.Float64()*math.Pow(10, float64(rng.IntN(60)-30)), 'e', rng.IntN(17), 64)
		case 3: // integers
			s = strconv.Itoa(rng.IntN(1 << 30))
		case 4: // leading zeros, signs, forms without a digit before the point
			s = fmt.Sprintf("%s0.%s%d", []string{"", "-", "+"}[rng.IntN(3)], strings.Repeat("0", rng.IntN(25)), rng.Int64())
		}
		checkValue(t, s)
	}
}

// TestTNSValueNearMidpoints feeds decimals that lie within a float64 ulp of
// a midpoint between two float32 values. A value converted to float64 first
// (correctly rounded) may land exactly on the midpoint, and rounding that
// to float32 then goes to even instead of toward the true value: the double
// rounding theorem (53 >= 2*24+2) covers operations on float32 operands
// only, not decimal conversion. The fast path must detect a result on a
// float32 midpoint and take the slow, exact path.
func TestTNSValueNearMidpoints(t *testing.T) {
	// Found by this test: "1.02494727820158e-01" read as 0x3dd1e8c2 where
	// the correctly rounded float32 is 0x3dd1e8c1.
	if v, _ := parseValue([]byte("1.02494727820158e-01")); math.Float32bits(v) != 0x3dd1e8c1 {
		t.Fatalf("1.02494727820158e-01 reads as %#x, want 0x3dd1e8c1", math.Float32bits(v))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		f := math.Float32frombits(uint32(rng.IntN(0x7f000000)) + 0x00800000)
		next := math.Nextafter32(f, float32(math.Inf(1)))
		mid := (float64(f) + float64(next)) / 2
		for _, digits := range []int{8, 10, 12, 14, 16, 19, 25} {
			checkValue(t, strconv.FormatFloat(mid, 'e', digits, 64))
		}
	}
}

// checkValue requires parseValue to agree bit for bit with strconv, or both
// to refuse s.
func checkValue(t *testing.T, s string) {
	t.Helper()
	got, msg := parseValue([]byte(s))
	w, err := strconv.ParseFloat(s, 32)
	want := float32(w)
	wantOK := err == nil && !math.IsInf(w, 0) && !math.IsNaN(w) && !underflows(s, w)
	if (msg == "") != wantOK {
		t.Fatalf("%q: reader says %q, strconv %v %v", s, msg, w, err)
	}
	if wantOK && math.Float32bits(got) != math.Float32bits(want) {
		t.Fatalf("%q: read %v (%08x), correctly rounded %v (%08x)", s, got, math.Float32bits(got), want, math.Float32bits(want))
	}
}

// TestWriteTNSText pins the writer's output: 1-based indices, shortest
// float32 values, the header variant only when the dims are not implied.
func TestWriteTNSText(t *testing.T) {
	x := &COO{Dims: []int{3, 2}, Inds: [][]uint32{{0, 2}, {1, 0}}, Vals: []float32{0.1, -3e-39}}
	var b bytes.Buffer
	if err := WriteTNS(&b, x); err != nil {
		t.Fatal(err)
	}
	if want := "1 2 0.1\n3 1 -3e-39\n"; b.String() != want {
		t.Fatalf("wrote %q, want %q", b.String(), want)
	}
	x.Dims[1] = 5
	b.Reset()
	if err := WriteTNS(&b, x); err != nil {
		t.Fatal(err)
	}
	if want := "2\n3 5\n1 2 0.1\n3 1 -3e-39\n"; b.String() != want {
		t.Fatalf("wrote %q, want %q", b.String(), want)
	}
	y, err := ReadTNS(&b, "w.tns")
	if err != nil || !y.Equal(x) {
		t.Fatalf("read back %v, %v", y, err)
	}
	x.Vals[0] = float32(math.NaN())
	if err := WriteTNS(&b, x); err == nil {
		t.Fatal("wrote a NaN")
	}
}

// TestTNSSpecialValues round-trips float32 values at the edges: signed
// zeros, subnormals, the extremes of the normal range.
func TestTNSSpecialValues(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		1.1754942e-38, 1.17549435e-38, math.MaxFloat32, -math.MaxFloat32, 1, 0.1, 16777217, 3.4028233e38}
	x, _ := NewCOO([]int{len(vals), 1}, len(vals))
	for k, v := range vals {
		x.Append([]uint32{uint32(k), 0}, v)
	}
	var b bytes.Buffer
	if err := WriteTNS(&b, x); err != nil {
		t.Fatal(err)
	}
	y, err := ReadTNS(&b, "s.tns")
	if err != nil {
		t.Fatal(err)
	}
	if !y.Equal(x) {
		t.Fatalf("got %v, want %v", y.Vals, x.Vals)
	}
}

// TestErrorsStayShort feeds fields and lines of megabytes (a corrupted file
// may hold a run of NUL bytes and no newline): the error must still be one
// short line, quoting only the start of the offending field, and reading a
// line much longer than a block must take linear time (it is carried into
// a buffer that doubles).
func TestErrorsStayShort(t *testing.T) {
	huge := strings.Repeat("\x00", 2<<20)
	tests := []struct {
		name string
		read func(string) error
		in   string
	}{
		{"tns first line", readTNSString, huge},
		{"tns index", readTNSString, "1 1 1\n" + huge + " 1 1\n"},
		{"tns value", readTNSString, "1 1 1\n1 1 " + huge + "\n"},
		{"tns dims line", readTNSString, "2\n3 " + huge + "\n"},
		{"mtx banner", readMTXString, "%%MatrixMarket " + strings.Repeat("x", 60000) + " a b c\n"},
		{"mtx size line", readMTXString, "%%MatrixMarket matrix coordinate real general\n1 " + strings.Repeat("9", 60000) + " 1\n"},
	}
	var long []string
	for _, tc := range tests {
		err := tc.read(tc.in)
		if err == nil {
			t.Fatalf("%s: accepted", tc.name)
		}
		if msg := err.Error(); len(msg) > 400 || strings.Contains(msg, "\n") {
			long = append(long, fmt.Sprintf("%s (%d bytes)", tc.name, len(msg)))
		}
	}
	if len(long) > 0 {
		t.Fatalf("errors too long or on several lines: %s", strings.Join(long, ", "))
	}
}

func readTNSString(s string) error { _, err := ReadTNS(strings.NewReader(s), "x.tns"); return err }
func readMTXString(s string) error { _, err := ReadMTX(strings.NewReader(s), "x.mtx"); return err }

// TestTNSGivesBlocks checks that the text reader hands its parsed blocks
// to package warm, and that it no longer reads them: the tensor comes out
// the same when everything the pool lends is overwritten after the read.
func TestTNSGivesBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := genCOO(rng, []int{300, 400, 50}, 40_000)
	x.Append([]uint32{299, 399, 49}, 1)
	text, _ := tnsText(rng, x)
	if len(text) < 4*warm.MinGift {
		t.Fatalf("the text is %d bytes, too short for a block the pool keeps", len(text))
	}
	warm.Reset() // as in a fresh process: earlier tests spent the pool
	defer warm.Reset()
	y, err := ReadTNS(bytes.NewReader(text), "gift.tns")
	if err != nil {
		t.Fatal(err)
	}
	free := warm.Free()
	if free < warm.MinGift {
		t.Fatalf("after reading %d bytes of text the pool has %d bytes, want at least %d", len(text), free, warm.MinGift)
	}
	junk := warm.Uint32s(free / 4)
	for i := range junk {
		junk[i] = 0xdeadbeef
	}
	if !y.Equal(x) {
		t.Fatal("the tensor read changed when the memory given away was overwritten")
	}
}

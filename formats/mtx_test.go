package formats

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// MatrixMarket tests beyond TestReadErrors and TestSymmetricExpansion
// (files_test.go): every accepted header form with its exact tensor, and
// every refusal with its full message.

func TestMTXAccepts(t *testing.T) {
	tests := []struct {
		name, in string
		want     *COO
	}{
		{"real general, dims from the size line",
			"%%MatrixMarket matrix coordinate real general\n% comment\n\n5 7 2\n1 1 1.5\n2 3 -2e-3\n",
			&COO{Dims: []int{5, 7}, Inds: [][]uint32{{0, 1}, {0, 2}}, Vals: []float32{1.5, -0.002}}},
		{"header case-insensitive, CRLF, tabs",
			"%%matrixmarket MATRIX Coordinate Real General\r\n2\t2\t1\r\n 2\t1\t4\r\n",
			&COO{Dims: []int{2, 2}, Inds: [][]uint32{{1}, {0}}, Vals: []float32{4}}},
		{"integer", "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 7\n2 1 -3\n",
			&COO{Dims: []int{2, 2}, Inds: [][]uint32{{0, 1}, {1, 0}}, Vals: []float32{7, -3}}},
		{"pattern", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 3\n3 2\n",
			&COO{Dims: []int{3, 3}, Inds: [][]uint32{{0, 2}, {2, 1}}, Vals: []float32{1, 1}}},
		{"symmetric: diagonal once, off-diagonal mirrored",
			"%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 2\n3 1 5\n3 3 -1\n",
			&COO{Dims: []int{3, 3}, Inds: [][]uint32{{0, 2, 0, 2}, {0, 0, 2, 2}}, Vals: []float32{2, 5, 5, -1}}},
		{"skew-symmetric: mirrored value negated",
			"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n3 1 5\n",
			&COO{Dims: []int{3, 3}, Inds: [][]uint32{{2, 0}, {0, 2}}, Vals: []float32{5, -5}}},
		{"comments between entries", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n% c\n\n2 2 2\n",
			&COO{Dims: []int{2, 2}, Inds: [][]uint32{{0, 1}, {0, 1}}, Vals: []float32{1, 2}}},
		{"no entries", "%%MatrixMarket matrix coordinate real general\n4 3 0\n",
			&COO{Dims: []int{4, 3}, Inds: [][]uint32{{}, {}}, Vals: []float32{}}},
		{"largest dims", fmt.Sprintf("%%%%MatrixMarket matrix coordinate real general\n%d %d 1\n%d 1 1\n", MaxDim, MaxDim, MaxDim),
			&COO{Dims: []int{MaxDim, MaxDim}, Inds: [][]uint32{{MaxDim - 1}, {0}}, Vals: []float32{1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ReadMTX(strings.NewReader(tc.in), "a.mtx")
			if err != nil {
				t.Fatal(err)
			}
			if !x.Equal(tc.want) {
				t.Fatalf("got %v %v %v, want %v %v %v", x.Dims, x.Inds, x.Vals, tc.want.Dims, tc.want.Inds, tc.want.Vals)
			}
			if err := x.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMTXRefuses(t *testing.T) {
	const gen = "%%MatrixMarket matrix coordinate real general\n"
	tests := []struct{ name, in, want string }{
		{"empty", "", "m.mtx: no nonzeros: expected a %%MatrixMarket banner, found an empty file"},
		{"not a banner", "1 1 1\n", "m.mtx:1: expected the banner \"%%MatrixMarket matrix coordinate real general\", found \"1 1 1\""},
		{"array", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "m.mtx:1: expected a coordinate (sparse) matrix, found \"array\", which sparsetune does not read"},
		{"complex", "%%MatrixMarket matrix coordinate complex general\n", "m.mtx:1: expected a real, integer or pattern field, found complex, which sparsetune does not read"},
		{"hermitian", "%%MatrixMarket matrix coordinate real hermitian\n", "m.mtx:1: expected general, symmetric or skew-symmetric, found hermitian, which sparsetune does not read"},
		{"unknown field", "%%MatrixMarket matrix coordinate quaternion general\n", "m.mtx:1: expected a real, integer or pattern field, found \"quaternion\""},
		{"no size line", gen + "% only comments\n", "m.mtx:3: expected the size line \"rows cols nnz\", found the end of the file"},
		{"size line two fields", gen + "2 2\n", "m.mtx:2: expected the size line \"rows cols nnz\", found \"2 2\""},
		{"size line negative", gen + "2 -2 1\n", "m.mtx:2: size line: expected a non-negative integer, found \"-2\""},
		{"size zero rows", gen + "0 2 0\n", "m.mtx:2: size line: expected rows and cols of 1 to " + maxDimText + ", found 0 x 2"},
		{"size beyond 2^32", gen + "4294967297 2 1\n", "m.mtx:2: size line: expected rows and cols of 1 to " + maxDimText + ", found 4294967297 x 2"},
		{"size nnz too large", gen + "2 2 4294967296\n", "m.mtx:2: size line: expected at most " + maxNNZText + " entries, found 4294967296"},
		{"skew not square", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 3 1\n", "m.mtx:2: expected a square skew-symmetric matrix, found 2 x 3"},
		{"pattern skew", "%%MatrixMarket matrix coordinate pattern skew-symmetric\n3 3 1\n3 1\n", "m.mtx:1: expected general or symmetric with the pattern field, found skew-symmetric"},
		{"index 0", gen + "2 2 1\n0 1 1\n", "m.mtx:3: row: expected a 1-based index (>= 1), found 0"},
		{"negative col", gen + "2 2 1\n1 -1 1\n", "m.mtx:3: col: expected a positive 1-based index, found \"-1\""},
		{"non-numeric row", gen + "2 2 1\nx 1 1\n", "m.mtx:3: row: expected an integer index, found \"x\""},
		{"col beyond size", gen + "% c\n2 2 2\n1 1 1\n1 3 1\n", "m.mtx:5: col: expected an index of at most 2 (the size line), found 3"},
		{"index beyond 2^32", gen + "2 2 1\n4294967297 1 1\n", "m.mtx:3: row: expected an index of at most " + maxDimText + ", found \"4294967297\""},
		{"missing value", gen + "2 2 1\n1 1\n", "m.mtx:3: value: expected a value, found the end of the line"},
		{"extra field", gen + "2 2 1\n1 1 1 1\n", "m.mtx:3: expected 3 fields for a real matrix, found 4"},
		{"integer extra field", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1 1\n", "m.mtx:3: expected 3 fields for an integer matrix, found 4"},
		{"pattern extra fields", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1 1\n", "m.mtx:3: expected 2 fields for a pattern matrix, found 4"},
		{"nan", gen + "2 2 1\n1 1 NaN\n", "m.mtx:3: value: expected a finite value, found \"NaN\""},
		{"inf", gen + "2 2 1\n1 1 -Inf\n", "m.mtx:3: value: expected a finite value, found \"-Inf\""},
		{"float32 overflow", gen + "2 2 1\n1 1 1e39\n", "m.mtx:3: value: expected a finite float32 value, found \"1e39\""},
		{"too few", gen + "2 2 3\n1 1 1\n2 2 2\n", "m.mtx:5: expected 3 entries (the size line), found 2 before the end of the file"},
		{"too many", gen + "2 2 1\n1 1 1\n% c\n2 2 2\n", "m.mtx:5: expected 1 entry (the size line), found more"},
		{"integer field, fraction", "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 3\n2 2 1.5\n", "m.mtx:4: value: expected an integer (the banner says integer), found \"1.5\""},
		{"skew diagonal", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 2\n2 1 1\n2 2 1\n", "m.mtx:4: expected no diagonal entries in a skew-symmetric matrix, found (2,2)"},
		{"line too long", gen + "2 2 1\n1 1 " + strings.Repeat("1", 70000) + "\n", "m.mtx:3: expected a line of at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ReadMTX(strings.NewReader(tc.in), "m.mtx")
			if err == nil {
				t.Fatalf("accepted: %v %v", x.Dims, x.Vals)
			}
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error is a %T, want *ParseError", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, tc.want) {
				t.Fatalf("error %q, want one line starting %q", msg, tc.want)
			}
		})
	}
}

// TestMTXHugeDeclaredCount checks that a size line claiming billions of
// entries in a short file is refused for the missing entries, without first
// allocating for them.
func TestMTXHugeDeclaredCount(t *testing.T) {
	in := "%%MatrixMarket matrix coordinate real symmetric\n" + maxDimText + " " + maxDimText + " " + maxNNZText + "\n1 1 1\n"
	_, err := ReadMTX(strings.NewReader(in), "h.mtx")
	if want := "h.mtx:4: expected " + maxNNZText + " entries (the size line), found 1 before the end of the file"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestWriteMTXText(t *testing.T) {
	x := &COO{Dims: []int{3, 4}, Inds: [][]uint32{{2, 0}, {0, 3}}, Vals: []float32{0.1, 16777216}}
	var b bytes.Buffer
	if err := WriteMTX(&b, x); err != nil {
		t.Fatal(err)
	}
	want := "%%MatrixMarket matrix coordinate real general\n% written by sparsetune\n3 4 2\n3 1 0.1\n1 4 1.6777216e+07\n"
	if b.String() != want {
		t.Fatalf("wrote %q, want %q", b.String(), want)
	}
	y, err := ReadMTX(&b, "w.mtx")
	if err != nil || !y.Equal(x) {
		t.Fatalf("read back %v, %v", y, err)
	}
	three, _ := NewCOO([]int{2, 2, 2}, 0)
	if err := WriteMTX(&b, three); err == nil || !strings.Contains(err.Error(), "expected an order-2 tensor, found order 3") {
		t.Fatalf("order 3: %v", err)
	}
	x.Inds[0][0] = 3
	if err := WriteMTX(&b, x); err == nil {
		t.Fatal("wrote an index beyond the dims")
	}
}

package formats

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// somePositions returns n increasing positions below nnz, some repeated,
// with the first and the last nonzero among them.
func somePositions(rng *rand.Rand, nnz, n int) []uint64 {
	pos := []uint64{0, uint64(nnz - 1)}
	for len(pos) < n {
		p := uint64(rng.IntN(nnz))
		pos = append(pos, p)
		if rng.IntN(8) == 0 {
			pos = append(pos, p) // drawn twice
		}
	}
	slices.Sort(pos)
	return pos
}

// TestReadFilePicked reads tensors of several pieces and chunks in every
// format that picks, and checks each pick against the tensor read.
func TestReadFilePicked(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	dir := t.TempDir()
	inputs := []struct {
		name string
		x    *COO
	}{
		// 300,000 nonzeros: five of the .stb check's pieces per array,
		// and several .tns blocks, parsed and joined by several workers.
		{"order 3", genCOO(rng, []int{700, 900, 60}, 300_000)},
		{"order 4", genCOO(rng, []int{40, 50, 60, 70}, 100_000)},
		{"one piece", genCOO(rng, []int{30, 40, 50}, 1_000)},
	}
	for _, in := range inputs {
		in.x.SumDuplicates()
		nnz := in.x.NNZ()
		for _, ext := range []string{".stb", ".stb.gz", ".tns", ".tns.gz"} {
			path := filepath.Join(dir, "p"+ext)
			if err := WriteFile(path, in.x); err != nil {
				t.Fatal(err)
			}
			want := somePositions(rng, nnz, min(nnz, 2048))
			var asked []int
			y, picks, summed, err := ReadFilePicked(path, func(n int) []uint64 {
				asked = append(asked, n)
				return slices.Clone(want)
			})
			if err != nil {
				t.Fatalf("%s %s: %v", in.name, ext, err)
			}
			if !y.Equal(in.x) || summed != 0 {
				t.Fatalf("%s %s: the tensor read with picks differs from the one written (summed %d)", in.name, ext, summed)
			}
			if !slices.Equal(asked, []int{nnz}) {
				t.Fatalf("%s %s: positions asked for %v, want once for %d", in.name, ext, asked, nnz)
			}
			if picks == nil {
				t.Fatalf("%s %s: no picks", in.name, ext)
			}
			if !slices.Equal(picks.Pos, want) || picks.Took <= 0 {
				t.Fatalf("%s %s: picks at %d positions, took %v", in.name, ext, len(picks.Pos), picks.Took)
			}
			if err := checkPicks(picks, y); err != nil {
				t.Fatalf("%s %s: %v", in.name, ext, err)
			}
		}
	}
}

// TestReadFilePickedNone: where the reader makes no picks, or must drop
// them, the tensor is read as ReadFile reads it and the picks are nil.
func TestReadFilePickedNone(t *testing.T) {
	dir := t.TempDir()
	x := genCOO(rand.New(rand.NewPCG(5, 5)), []int{20, 30, 40}, 500)
	x.SumDuplicates()
	stb := filepath.Join(dir, "x.stb")
	if err := WriteFile(stb, x); err != nil {
		t.Fatal(err)
	}
	dup := filepath.Join(dir, "dup.tns")
	if err := os.WriteFile(dup, []byte("1 1 1 2.5\n2 2 2 1\n1 1 1 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtx := filepath.Join(dir, "m.mtx")
	if err := os.WriteFile(mtx, []byte("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all := func(nnz int) []uint64 {
		p := make([]uint64, nnz)
		for i := range p {
			p[i] = uint64(i)
		}
		return p
	}
	for _, c := range []struct {
		name, path string
		positions  func(int) []uint64
	}{
		{"nil function", stb, nil},
		{"no positions", stb, func(int) []uint64 { return nil }},
		{"unsorted", stb, func(int) []uint64 { return []uint64{5, 3} }},
		{"beyond the nonzeros", stb, func(nnz int) []uint64 { return []uint64{1, uint64(nnz)} }},
		{"duplicates summed", dup, all},
		{"MatrixMarket", mtx, all},
	} {
		want, err := ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		y, picks, _, err := ReadFilePicked(c.path, c.positions)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !y.Equal(want) || picks != nil {
			t.Errorf("%s: tensor as ReadFile's %v, picks %v; want the same tensor and no picks", c.name, y.Equal(want), picks)
		}
	}
}

// TestPicksCheck: checkPicks finds a wrong pick and picks made for another
// tensor.
func TestPicksCheck(t *testing.T) {
	x := genCOO(rand.New(rand.NewPCG(6, 6)), []int{20, 30, 40}, 500)
	pos := []uint64{0, 7, 7, uint64(x.NNZ() - 1)}
	p := &Picks{NNZ: x.NNZ(), Pos: pos, Inds: make([][]uint32, 3)}
	for m, ind := range x.Inds {
		for _, at := range pos {
			p.Inds[m] = append(p.Inds[m], ind[at])
		}
	}
	if err := checkPicks(p, x); err != nil {
		t.Fatalf("right picks refused: %v", err)
	}
	p.Inds[2][1]++
	if err := checkPicks(p, x); err == nil || !strings.Contains(err.Error(), "mode 3, nonzero 8") {
		t.Fatalf("a wrong pick: %v", err)
	}
	p.Inds[2][1]--
	p.NNZ++
	if err := checkPicks(p, x); err == nil {
		t.Fatal("picks made for another nonzero count accepted")
	}
}

// TestSTBPiecesCheckOrder: the .stb check goes a piece at a time, but a
// checksum mismatch anywhere in an array still wins over bad content in
// it, and bad content is reported at the offset of its first bad index,
// in whichever piece.
func TestSTBPiecesCheckOrder(t *testing.T) {
	const nnz = 3*stbCheckPiece + 100
	rng := rand.New(rand.NewPCG(7, 7))
	dims := []uint64{10, 20}
	arrays := [][]uint32{make([]uint32, nnz), make([]uint32, nnz), make([]uint32, nnz)}
	for k := range nnz {
		arrays[0][k], arrays[1][k] = uint32(rng.IntN(10)), uint32(rng.IntN(20))
		arrays[2][k] = 0x3f800000 // 1.0
	}
	bad := 2*stbCheckPiece + 17
	arrays[1][bad] = 20 // beyond the dim, with the checksum computed over it
	data := stbBytes(1, dims, nnz, arrays)
	at := stbFixed + 8*len(dims) + 4 + 4*nnz + 4*bad
	_, err := readSTB(data, true)
	if err == nil || !strings.Contains(err.Error(), "offset "+strconv.Itoa(at)+":") || !strings.Contains(err.Error(), "mode 2: expected an index below the dim 20") {
		t.Fatalf("bad index in the third piece: %v", err)
	}
	// Arrays report in order: a flipped bit in mode 1's indices comes
	// first.
	c := bytes.Clone(data)
	c[at-4*nnz+4*90] ^= 1
	if _, err := readSTB(c, true); err == nil || !strings.Contains(err.Error(), "checksum mismatch in the mode 1 indices") {
		t.Fatalf("flipped mode 1 bit: %v", err)
	}
	// And the same index array with a flipped bit after the bad index.
	c = bytes.Clone(data)
	c[at+4*stbCheckPiece] ^= 2
	if _, err := readSTB(c, true); err == nil || !strings.Contains(err.Error(), "checksum mismatch in the mode 2 indices") {
		t.Fatalf("flipped index bit after a bad index: %v", err)
	}
}

// BenchmarkReadPicked reads a 2 M-nonzero .stb file plainly and picking
// 1,024 nonzeros (the sample of a tensor this size): the picks should
// cost the read next to nothing, and Picks.Took says what they cost.
func BenchmarkReadPicked(b *testing.B) {
	x := genCOO(rand.New(rand.NewPCG(1, 1)), []int{100000, 50000, 2000}, 2_000_000)
	path := filepath.Join(b.TempDir(), "x.stb")
	if err := WriteFile(path, x); err != nil {
		b.Fatal(err)
	}
	pos := somePositions(rand.New(rand.NewPCG(2, 2)), x.NNZ(), 1024)
	b.Run("plain", func(b *testing.B) {
		for range b.N {
			collect(b)
			if _, _, err := ReadFileSummed(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("picked", func(b *testing.B) {
		var took time.Duration
		for range b.N {
			collect(b)
			_, p, _, err := ReadFilePicked(path, func(int) []uint64 { return slices.Clone(pos) })
			if err != nil || p == nil {
				b.Fatal(err, p)
			}
			took += p.Took
		}
		b.ReportMetric(took.Seconds()*1e6/float64(b.N), "took-µs/op")
	})
}

// checkPicks reports whether p holds t's indices at its positions, every
// one: the test of a reader's picks. It reads t at every position.
func checkPicks(p *Picks, t *COO) error {
	if p.NNZ != t.NNZ() || len(p.Inds) != t.Order() {
		return fmt.Errorf("picks: made for %d nonzeros of order %d, the tensor has %d of order %d", p.NNZ, len(p.Inds), t.NNZ(), t.Order())
	}
	for m, ind := range t.Inds {
		if len(p.Inds[m]) != len(p.Pos) {
			return fmt.Errorf("picks: mode %d has %d indices for %d positions", m+1, len(p.Inds[m]), len(p.Pos))
		}
		for k, at := range p.Pos {
			if p.Inds[m][k] != ind[at] {
				return fmt.Errorf("picks: mode %d, nonzero %d: picked %d, the tensor has %d", m+1, at+1, p.Inds[m][k], ind[at])
			}
		}
	}
	return nil
}

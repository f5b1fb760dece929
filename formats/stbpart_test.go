package formats

import (
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCRC32CCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	want := crc32.Checksum(data, castagnoli)
	for _, cuts := range [][]int{{0}, {1}, {5000}, {0, 10000}, {3, 4, 999, 7000}} {
		var crc uint32
		prev := 0
		for _, c := range append(cuts, len(data)) {
			crc = crc32cCombine(crc, crc32.Checksum(data[prev:c], castagnoli), int64(c-prev))
			prev = c
		}
		if crc != want {
			t.Errorf("cuts %v: combined %08x, whole %08x", cuts, crc, want)
		}
	}
}

// Reading a file by parts gives the whole tensor back, and the parts'
// checksums verify it; a corrupted file fails one or the other.
func TestReadBinaryPart(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, _ := NewCOO([]int{40, 30, 20}, 0)
	for range 1001 {
		x.Append([]uint32{uint32(rng.IntN(40)), uint32(rng.IntN(30)), uint32(rng.IntN(20))}, rng.Float32())
	}
	path := filepath.Join(t.TempDir(), "x.stb")
	if err := WriteFile(path, x); err != nil {
		t.Fatal(err)
	}
	for _, parts := range []int{1, 2, 3, 7} {
		whole, _ := NewCOO(x.Dims, x.NNZ())
		var sums [][]uint32
		var lens []int
		var stored []uint32
		coord := make([]uint32, 3)
		for k := range parts {
			p, err := ReadBinaryPart(path, k, parts)
			if err != nil {
				t.Fatal(err)
			}
			for j := range p.NNZ() {
				whole.Append(p.Coord(j, coord), p.Vals[j])
			}
			sums, lens, stored = append(sums, p.Sums), append(lens, p.NNZ()), p.Stored
		}
		if !whole.Equal(x) {
			t.Errorf("%d parts: the parts do not make the tensor", parts)
		}
		if err := VerifyBinaryParts(path, stored, sums, lens); err != nil {
			t.Errorf("%d parts: %v", parts, err)
		}
	}
	data, _ := os.ReadFile(path)
	data[len(data)-4*4-7] ^= 0x40 // a value's bits, near the end
	os.WriteFile(path, data, 0o644)
	p0, err0 := ReadBinaryPart(path, 0, 2)
	p1, err1 := ReadBinaryPart(path, 1, 2)
	if err0 == nil && err1 == nil {
		err := VerifyBinaryParts(path, p0.Stored, [][]uint32{p0.Sums, p1.Sums}, []int{p0.NNZ(), p1.NNZ()})
		if err == nil || !strings.Contains(err.Error(), "checksum mismatch in the values") {
			t.Errorf("a corrupted value: %v", err)
		}
	}
	if _, err := ReadBinaryPart(path, 2, 2); err == nil {
		t.Error("part 2 of 2 accepted")
	}
}

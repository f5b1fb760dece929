package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/sysmem"
)

// A tensor whose indices are identifiers (dims near 2^31, a few hundred
// used) gets an error naming the memory and the sparse modes from every
// command that sizes dense factors by the dims, not the runtime's fatal
// out-of-memory; converted with --compact it runs, and the index map
// gives back the original indices.
func TestHugeDimsAndCompact(t *testing.T) {
	const big = 2147483647 // 1-based: the largest index any platform reads
	if avail, ok := sysmem.Available(); !ok || avail > 1<<39 {
		t.Skipf("needs a Linux machine with less than 512 GiB available (have %d, known %v)", avail, ok)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "ids.tns")
	var b strings.Builder
	for k := range 300 {
		// Modes 1 and 2 spread over [1, 2^31); mode 3 is a dense 1..6.
		fmt.Fprintf(&b, "%d %d %d %g\n", 1+k*7158278, big-k*(k%7)*1000, 1+k%6, 1+float64(k%5))
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"mttkrp", in, "--mode", "3", "--rank", "16"},
		{"ttm", in, "--mode", "1", "--rank", "16"},
		{"cpd", in, "--rank", "16"},
		{"cpapr", in, "--rank", "16"},
		{"tucker", in, "--ranks", "4,4,4"},
	} {
		_, _, err := run(t, args...)
		if err == nil {
			t.Fatalf("%v: ran on dims of 2^31 at rank 16", args)
		}
		msg := err.Error()
		for _, want := range []string{"iB, more than", "modes 1, 2 use only 300, ", "--compact"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: error %q lacks %q", args, msg, want)
			}
		}
	}

	// bench times what fits and says why it skips the rest.
	stdout, _, err := run(t, "bench", in, "--iters", "1", "--probe=false", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []benchRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, r := range rows {
		if r.Skipped == "" {
			continue
		}
		skipped++
		for _, want := range []string{"iB, more than", "modes 1, 2 use only 300, ", "--compact"} {
			if !strings.Contains(r.Skipped, want) {
				t.Errorf("bench %s mode %d %s: skipped %q lacks %q", r.Op, r.Mode, r.Format, r.Skipped, want)
			}
		}
	}
	if skipped == 0 {
		t.Errorf("bench ran every format on dims of 2^31 at rank 16")
	}

	out := filepath.Join(dir, "ids.stb")
	if _, _, err := run(t, "convert", in, out, "--compact"); err != nil {
		t.Fatal(err)
	}
	x, err := formats.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	c, err := formats.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if c.NNZ() != x.NNZ() || c.Dims[0] != 300 || c.Dims[1] != x.UsedIndices(1) || c.Dims[2] != 6 {
		t.Fatalf("compact copy %v with %d nonzeros, from %v with %d", c.Dims, c.NNZ(), x.Dims, x.NNZ())
	}
	// Every nonzero of the compact copy maps back to one of the original
	// with the same value (both are sorted and deduplicated on reading).
	orig := readIndexMap(t, out+".index.tsv", 3)
	want := map[[3]uint32]float32{}
	for k := range x.NNZ() {
		want[[3]uint32{x.Inds[0][k], x.Inds[1][k], x.Inds[2][k]}] = x.Vals[k]
	}
	for k := range c.NNZ() {
		key := [3]uint32{orig[0][c.Inds[0][k]], orig[1][c.Inds[1][k]], orig[2][c.Inds[2][k]]}
		if v, ok := want[key]; !ok || v != c.Vals[k] {
			t.Fatalf("compact nonzero %d maps to %v = %v, not a nonzero of the original", k, key, c.Vals[k])
		}
	}
	if stdout, _, err := run(t, "cpd", out, "--rank", "4", "--iters", "3"); err != nil || !strings.Contains(stdout, "CP-ALS of") {
		t.Fatalf("cpd on the compact copy: %v\n%s", err, stdout)
	}
}

// readIndexMap reads convert --compact's map: orig[m][j] is the 0-based
// original index of 0-based compact index j of mode m.
func readIndexMap(t *testing.T, path string, order int) [][]uint32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	orig := make([][]uint32, order)
	sc := bufio.NewScanner(f)
	sc.Scan()
	if sc.Text() != "mode\tindex\toriginal" {
		t.Fatalf("%s: header %q", path, sc.Text())
	}
	for sc.Scan() {
		var m, j int
		var o uint32
		if _, err := fmt.Sscanf(sc.Text(), "%d\t%d\t%d", &m, &j, &o); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		if m < 1 || m > order || j != len(orig[m-1])+1 || o < 1 {
			t.Fatalf("%s: line %q out of sequence", path, sc.Text())
		}
		orig[m-1] = append(orig[m-1], o-1)
	}
	return orig
}

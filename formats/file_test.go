package formats

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// manifestEntry is what MANIFEST.tsv says about one data file.
type manifestEntry struct {
	dims []int
	nnz  int // the expanded count (nnz_full) for symmetric matrices
}

var nnzFull = regexp.MustCompile(`nnz_full=(\d+)`)

// readManifest parses ../../shared/data/MANIFEST.tsv (kind name file
// source_repo source_commit source_path rows/dims nnz bytes notes), keyed by
// the file column.
func readManifest(t *testing.T) map[string]manifestEntry {
	f, err := os.Open(filepath.Join(sharedData, "MANIFEST.tsv"))
	if err != nil {
		t.Skipf("no manifest in %s: skipping (%v)", sharedData, err)
	}
	defer f.Close()
	out := map[string]manifestEntry{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for first := true; sc.Scan(); first = false {
		c := strings.Split(sc.Text(), "\t")
		if first || len(c) < 10 {
			continue
		}
		var e manifestEntry
		for _, d := range strings.Split(c[6], "x") {
			n, err := strconv.Atoi(d)
			if err != nil {
				t.Fatalf("MANIFEST %s: dims %q", c[1], c[6])
			}
			e.dims = append(e.dims, n)
		}
		if e.nnz, err = strconv.Atoi(c[7]); err != nil {
			t.Fatalf("MANIFEST %s: nnz %q", c[1], c[7])
		}
		if m := nnzFull.FindStringSubmatch(c[9]); m != nil {
			e.nnz, _ = strconv.Atoi(m[1])
		}
		out[c[2]] = e
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFileRealDataManifest reads every shared data file through ReadFile
// and checks dims and nnz against MANIFEST.tsv (nnz_full for symmetric and
// skew-symmetric matrices). Each file is then written through WriteFile
// and read back: as .stb, and in one more of .tns, .tns.gz, .stb.gz, .mtx,
// .mtx.gz (matrices), taken in turn, so every format sees dozens of real
// files (files over 512 KiB take .stb only: writing text and compressing at
// WriteFile's level dominate the time, more so under the race detector);
// the largest tensor goes through .tns too. Every third file is also
// gzipped as it is (fast level) and must read the same. (TestRealRoundTrip already
// round-trips every file through every stream codec; this test covers the
// file layer and stays fast enough for the race detector in CI.)
func TestFileRealDataManifest(t *testing.T) {
	files := realFiles(t)
	manifest := readManifest(t)
	dir := t.TempDir()
	// Two files at a time: reading and gzip are CPU-bound, WriteFile waits
	// on fsync.
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	checked := 0
	for i, path := range files {
		rel, _ := filepath.Rel(sharedData, path)
		e, ok := manifest[filepath.ToSlash(rel)]
		if !ok {
			t.Errorf("%s is not in MANIFEST.tsv", rel)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := checkRealFile(path, e, filepath.Join(dir, strconv.Itoa(i)), i); err != "" {
				mu.Lock()
				t.Errorf("%s: %s", rel, err)
				mu.Unlock()
			}
			mu.Lock()
			checked++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d files match MANIFEST.tsv and round-trip through the file layer", checked)
}

// checkRealFile does the work of TestFileRealDataManifest for the i-th
// file and returns what went wrong, or "".
func checkRealFile(path string, e manifestEntry, out string, i int) string {
	// MANIFEST counts the file's entries; a coordinate listed twice is
	// one nonzero after the read.
	x, summed, err := ReadFileSummed(path)
	if err != nil {
		return err.Error()
	}
	if !slices.Equal(x.Dims, e.dims) || x.NNZ()+summed != e.nnz {
		return "read dims " + FormatDims(x.Dims) + " nnz " + strconv.Itoa(x.NNZ()) + " (+" + strconv.Itoa(summed) + " duplicates summed)" +
			", MANIFEST says " + FormatDims(e.dims) + " nnz " + strconv.Itoa(e.nnz)
	}
	if err := x.Validate(); err != nil {
		return err.Error()
	}
	largest := filepath.Base(path) == "splatt_med4.tns"
	if i%3 == 0 || largest {
		// A gzipped copy of the original bytes reads the same.
		raw, err := os.ReadFile(path)
		if err != nil {
			return err.Error()
		}
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
		zw.Write(raw)
		zw.Close()
		gz := out + "-orig" + filepath.Ext(path) + ".gz"
		if err := os.WriteFile(gz, z.Bytes(), 0o644); err != nil {
			return err.Error()
		}
		if y, err := ReadFile(gz); err != nil || !y.Equal(x) {
			return "gzipped copy reads differently: " + errString(err)
		}
	}
	more := []string{".tns", ".tns.gz", ".stb.gz"}
	if x.Order() == 2 {
		more = append(more, ".mtx", ".mtx.gz")
	}
	exts := []string{".stb", more[i%len(more)]}
	if st, err := os.Stat(path); err == nil && st.Size() > 512<<10 {
		exts = exts[:1] // large: text and gzip cost, see above
	}
	if largest {
		exts = []string{".stb", ".tns"}
	}
	for _, ext := range exts {
		p := out + ext
		if err := WriteFile(p, x); err != nil {
			return err.Error()
		}
		y, err := ReadFile(p)
		if err != nil {
			return ext + ": " + err.Error()
		}
		if !y.Equal(x) {
			return "round trip through " + ext + " changed the tensor"
		}
		os.Remove(p)
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestFileExtensions checks the dispatch: every supported extension in any
// case, and a clear refusal listing them otherwise.
func TestFileExtensions(t *testing.T) {
	for _, tc := range []struct {
		path   string
		format FileFormat
		gz     bool
	}{
		{"a.tns", FROSTT, false}, {"dir.x/a.TNS", FROSTT, false}, {"a.tns.gz", FROSTT, true}, {"a.Tns.GZ", FROSTT, true},
		{"a.mtx", MatrixMarket, false}, {"a.mtx.gz", MatrixMarket, true},
		{"a.stb", Binary, false}, {"a.b.stb.gz", Binary, true},
	} {
		f, gz, err := FormatOf(tc.path)
		if err != nil || f != tc.format || gz != tc.gz {
			t.Errorf("FormatOf(%q) = %q, %v, %v; want %q, %v", tc.path, f, gz, err, tc.format, tc.gz)
		}
	}
	x := &COO{Dims: []int{2, 2}, Inds: [][]uint32{{0}, {1}}, Vals: []float32{1}}
	dir := t.TempDir()
	for _, p := range []string{"a.csv", "a.gz", "a", "a.tns.bz2", "a.gz.tns.x"} {
		path := filepath.Join(dir, p)
		want := path + ": unknown tensor file extension: expected .tns, .mtx or .stb, optionally followed by .gz"
		if _, err := ReadFile(path); err == nil || err.Error() != want {
			t.Errorf("ReadFile(%q): %v, want %q", p, err, want)
		}
		if err := WriteFile(path, x); err == nil || err.Error() != want {
			t.Errorf("WriteFile(%q): %v, want %q", p, err, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused writes left %v", entries)
	}
}

// TestFileFailedWritesLeaveNothing makes WriteFile fail in each way it can
// before the rename and checks that neither the output nor a temporary
// file remains, and that an existing output is left untouched.
func TestFileFailedWritesLeaveNothing(t *testing.T) {
	dir := t.TempDir()
	good := &COO{Dims: []int{2, 3}, Inds: [][]uint32{{0, 1}, {2, 0}}, Vals: []float32{1, 2}}
	nan := good.Clone()
	nan.Vals[1] = float32(nanValue())
	beyond := good.Clone()
	beyond.Inds[1][0] = 3
	order3 := &COO{Dims: []int{2, 2, 2}, Inds: [][]uint32{{0}, {1}, {1}}, Vals: []float32{1}}
	existing := filepath.Join(dir, "keep.tns")
	if err := WriteFile(existing, good); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(existing)
	for _, tc := range []struct {
		name string
		x    *COO
	}{
		{"nan.tns", nan}, {"nan.stb.gz", nan}, {"beyond.stb", beyond}, {"beyond.mtx", beyond},
		{"order3.mtx", order3}, {"keep.tns", nan}, {"keep.tns", beyond},
	} {
		if err := WriteFile(filepath.Join(dir, tc.name), tc.x); err == nil {
			t.Errorf("%s: invalid tensor written", tc.name)
		}
	}
	// A directory in the way of the rename: everything is written and
	// synced, then the rename fails.
	if err := os.Mkdir(filepath.Join(dir, "adir.tns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "adir.tns"), good); err == nil {
		t.Error("renamed over a directory")
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"adir.tns", "keep.tns"}) {
		t.Errorf("directory holds %v, want only adir.tns and keep.tns", names)
	}
	if after, _ := os.ReadFile(existing); !bytes.Equal(before, after) {
		t.Error("a failed write changed an existing file")
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

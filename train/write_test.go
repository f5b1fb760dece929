package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

// smallSet is a plan of small tensors over the shared matrices.
func smallSet(t *testing.T, count int) []Spec {
	t.Helper()
	specs, err := Plan(scanMatrices(t), PlanOptions{Count: count, Seed: 77, MaxNNZ: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

// readManifestAt reads the manifest of dir.
func readManifestAt(t *testing.T, dir string) []Entry {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := ReadManifest(f, ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// TestManifestRebuild writes a set, then rebuilds every tensor from its
// manifest line alone and compares it with the file.
func TestManifestRebuild(t *testing.T) {
	specs := smallSet(t, 6)
	out := t.TempDir()
	for _, ext := range []string{".stb", ".tns"} {
		if _, err := WriteSet(context.Background(), specs, WriteOptions{From: matrixDir, Out: out, Ext: ext}); err != nil {
			t.Fatal(err)
		}
	}
	entries := readManifestAt(t, out)
	if len(entries) != 2*len(specs) {
		t.Fatalf("%d manifest lines, want %d", len(entries), 2*len(specs))
	}
	for _, e := range entries {
		// Through JSON: only what the line holds.
		var buf bytes.Buffer
		if err := WriteManifest(&buf, []Entry{e}); err != nil {
			t.Fatal(err)
		}
		back, err := ReadManifest(&buf, "line")
		if err != nil {
			t.Fatal(err)
		}
		rebuilt, err := Rebuild(matrixDir, back[0])
		if err != nil {
			t.Fatal(err)
		}
		file, err := formats.ReadFile(filepath.Join(out, e.File))
		if err != nil {
			t.Fatal(err)
		}
		if !rebuilt.Equal(file) {
			t.Fatalf("%s: the rebuilt tensor differs from the file", e.File)
		}
		st, _ := os.Stat(filepath.Join(out, e.File))
		if st.Size() != e.Bytes || e.NNZ != file.NNZ() || e.Version != Version {
			t.Fatalf("%s: manifest says %d bytes, %d nonzeros; file has %d, %d", e.File, e.Bytes, e.NNZ, st.Size(), file.NNZ())
		}
	}
	// A line whose checksum is not the tensor's is refused.
	e := entries[0]
	e.CRC32C = "00000000"
	if _, err := Rebuild(matrixDir, e); err == nil || !strings.Contains(err.Error(), "the manifest says") {
		t.Fatalf("wrong checksum: %v", err)
	}
	e = entries[0]
	e.Version = Version + 1
	if _, err := Rebuild(matrixDir, e); err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("other version: %v", err)
	}
}

func TestReadManifestErrors(t *testing.T) {
	good := `{"file":"a.stb","generator":"lift","order":3,"source":"m.mtx","stages":[{"generator":"lift","size":2,"at":3,"grow":2,"support":2}],"seed":1,"source_dims":[3,3],"source_nnz":4,"dims":[3,3,2],"nnz":8,"bytes":1,"crc32c":"0","version":1}`
	cases := []struct{ text, want string }{
		{good + "\n\n" + good + "\n", ""},
		{good + "\nnot json\n", "m:2: expected a JSON manifest entry"},
		{strings.Replace(good, `"order":3`, `"order":4`, 1), "m:1: bad manifest entry: generator"},
		{strings.Replace(good, `"seed":1`, `"seed":1,"colour":2`, 1), "unknown field"},
		{strings.Replace(good, `"a.stb"`, `"../a.stb"`, 1), "without directory"},
	}
	for _, c := range cases {
		entries, err := ReadManifest(strings.NewReader(c.text), "m")
		if c.want == "" {
			if err != nil || len(entries) != 2 {
				t.Errorf("%d entries, error %v", len(entries), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
}

func TestWriteSetResumes(t *testing.T) {
	specs := smallSet(t, 8)
	out := t.TempDir()
	ctx := context.Background()
	opt := WriteOptions{From: matrixDir, Out: out}
	sum, err := WriteSet(ctx, specs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 8 || sum.Skipped != 0 {
		t.Fatalf("first run: %+v", sum)
	}
	first := readManifestAt(t, out)
	var skipped int
	opt.Progress = func(p Progress) {
		if p.Skipped {
			skipped++
		}
	}
	if sum, err = WriteSet(ctx, specs, opt); err != nil || sum.Written != 0 || skipped != 8 {
		t.Fatalf("second run: %+v, %d skipped, %v", sum, skipped, err)
	}
	// A lost file, and a manifest cut mid-line as a killed run leaves it:
	// both tensors are made again, identically.
	if err := os.Remove(filepath.Join(out, first[2].File)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, ManifestName)
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, data[:len(data)-40], 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, err = WriteSet(ctx, specs, opt); err != nil || sum.Written != 2 || sum.Skipped != 6 {
		t.Fatalf("after damage: %+v, %v", sum, err)
	}
	again := readManifestAt(t, out)
	if len(again) != len(first) {
		t.Fatalf("%d manifest lines, want %d", len(again), len(first))
	}
	for i := range first {
		if first[i].File != again[i].File || first[i].CRC32C != again[i].CRC32C {
			t.Fatalf("line %d: %s %s became %s %s", i+1, first[i].File, first[i].CRC32C, again[i].File, again[i].CRC32C)
		}
	}
	// Another set under the same names is refused before anything is
	// written.
	other := smallSet(t, 8)
	other[3].Seed++
	if _, err := WriteSet(ctx, other, opt); err == nil || !strings.Contains(err.Error(), "another tensor") {
		t.Fatalf("another set: %v", err)
	}
}

func TestWriteSetErrors(t *testing.T) {
	specs := smallSet(t, 2)
	ctx := context.Background()
	out := t.TempDir()
	missing := append([]Spec(nil), specs...)
	missing[1].Source = "no-such.mtx"
	dup := []Spec{specs[0], specs[0]}
	cases := []struct {
		name  string
		specs []Spec
		opt   WriteOptions
		want  string
	}{
		{"no from", specs, WriteOptions{From: filepath.Join(out, "none"), Out: out}, "no such file"},
		{"from is a file", specs, WriteOptions{From: filepath.Join(matrixDir, "add32.mtx"), Out: out}, "not a directory"},
		{"bad ext", specs, WriteOptions{From: matrixDir, Out: out, Ext: ".mtx"}, "expected .stb or .tns"},
		{"missing matrix", missing, WriteOptions{From: matrixDir, Out: out}, "no-such.mtx: no such matrix file"},
		{"same name twice", dup, WriteOptions{From: matrixDir, Out: out}, "used twice"},
	}
	for _, c := range cases {
		if _, err := WriteSet(ctx, c.specs, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(out); len(ents) > 1 {
		t.Errorf("failed runs left %d files", len(ents))
	}
}

// TestWriteSetSkipsBadSource: a source matrix that does not read has its
// tensors left out, with a warning and a line in the summary, and the
// other sources' tensors are made and listed.
func TestWriteSetSkipsBadSource(t *testing.T) {
	specs := smallSet(t, 4)
	from := t.TempDir()
	for _, s := range specs {
		data, err := os.ReadFile(filepath.Join(matrixDir, s.Source))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(from, s.Source), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad := specs[1].Source
	if err := os.WriteFile(filepath.Join(from, bad), []byte("%%MatrixMarket matrix coordinate real general\n5 5 1\n1 1 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, s := range specs {
		if s.Source == bad {
			lost++
		}
	}
	var warnings []string
	out := t.TempDir()
	sum, err := WriteSet(context.Background(), specs, WriteOptions{From: from, Out: out, Warn: func(w string) { warnings = append(warnings, w) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Failed) != 1 || !strings.Contains(sum.Failed[0], bad+":3: value") || sum.Missing != lost || len(warnings) != 1 {
		t.Errorf("failed %q, missing %d (want %d), warnings %q", sum.Failed, sum.Missing, lost, warnings)
	}
	if got := len(readManifestAt(t, out)); sum.Written != len(specs)-lost || got != sum.Written {
		t.Errorf("%d written, %d in the manifest, want %d", sum.Written, got, len(specs)-lost)
	}
}

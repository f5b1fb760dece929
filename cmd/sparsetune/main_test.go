package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

const dataDir = "../../../shared/data"

// run executes the command line args in-process and returns stdout, stderr
// and the error Execute returned.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

type manifestRow struct {
	kind, name, file string
	dims             []int
	nnz              int
}

// readManifest returns the rows of MANIFEST.tsv, with nnz replaced by
// nnz_full for symmetric matrices (sparsetune expands them).
func readManifest(t *testing.T) []manifestRow {
	f, err := os.Open(filepath.Join(dataDir, "MANIFEST.tsv"))
	if err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	defer f.Close()
	full := regexp.MustCompile(`nnz_full=(\d+)`)
	var rows []manifestRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) < 10 || c[0] == "kind" {
			continue
		}
		r := manifestRow{kind: c[0], name: c[1], file: c[2]}
		for _, d := range strings.Split(c[6], "x") {
			n, err := strconv.Atoi(d)
			if err != nil {
				t.Fatalf("MANIFEST %s: dims %q", c[1], c[6])
			}
			r.dims = append(r.dims, n)
		}
		r.nnz, _ = strconv.Atoi(c[7])
		if m := full.FindStringSubmatch(c[9]); m != nil {
			r.nnz, _ = strconv.Atoi(m[1])
		}
		rows = append(rows, r)
	}
	return rows
}

// TestInfoMatchesManifest runs info --json on every file of the shared data
// and checks dims and nnz against MANIFEST.tsv.
func TestInfoMatchesManifest(t *testing.T) {
	rows := readManifest(t)
	if len(rows) == 0 {
		t.Fatal("MANIFEST.tsv has no rows")
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			out, stderr, err := run(t, "info", "--json", filepath.Join(dataDir, r.file))
			if err != nil {
				t.Fatal(err)
			}
			var rep infoReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bad JSON: %v", err)
			}
			// MANIFEST counts the file's entries; a coordinate listed twice
			// is one nonzero, and info says how many it summed.
			summed := 0
			if m := regexp.MustCompile(`summed (\d+) duplicate`).FindStringSubmatch(stderr); m != nil {
				summed, _ = strconv.Atoi(m[1])
			}
			if !slices.Equal(rep.Dims, r.dims) || rep.NNZ+summed != r.nnz {
				t.Fatalf("info says %v nnz %d (+%d duplicates summed), MANIFEST %v nnz %d", rep.Dims, rep.NNZ, summed, r.dims, r.nnz)
			}
			if len(rep.Modes) != len(r.dims) {
				t.Fatalf("%d mode reports for order %d", len(rep.Modes), len(r.dims))
			}
			for _, m := range rep.Modes {
				if m.Slices < 1 || m.Slices > m.Dim || m.Fibers < 1 || m.Fibers > rep.NNZ || m.NNZPerSlice.Max > rep.NNZ {
					t.Errorf("mode %d implausible: %+v", m.Mode, m)
				}
			}
			if len(rep.Formats) == 0 {
				t.Error("no format footprints")
			}
		})
	}
}

func TestInfoSample(t *testing.T) {
	out, stderr, err := run(t, "info")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "embedded sample") || !strings.Contains(out, "400x300x24") {
		t.Fatalf("info without FILE: stdout %q stderr %q", out, stderr)
	}
}

func TestConvertRoundTrip(t *testing.T) {
	src := filepath.Join(dataDir, "tensors", "kg_nations.tns")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("real data absent: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "x.stb.gz")
	back := filepath.Join(dir, "x.tns")
	for _, args := range [][]string{{"convert", src, bin}, {"convert", "--json", bin, back}} {
		if _, _, err := run(t, args...); err != nil {
			t.Fatal(err)
		}
	}
	a, err := formats.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := formats.ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Equal(b) {
		t.Fatal(".tns -> .stb.gz -> .tns changed the tensor")
	}
}

// TestBadInputExitsWithOneLine runs the built binary on malformed files and
// checks each exits non-zero with exactly one line on stderr, no panic and
// no output file.
func TestBadInputExitsWithOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "sparsetune")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	good, err := formats.NewCOO([]int{4, 5, 6}, 3)
	if err != nil {
		t.Fatal(err)
	}
	good.Append([]uint32{0, 1, 2}, 1.5)
	good.Append([]uint32{3, 4, 5}, -2)
	good.Append([]uint32{2, 0, 0}, 7)
	var stb bytes.Buffer
	if err := formats.WriteBinary(&stb, good); err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(stb.Bytes())
	corrupt[len(corrupt)/2] ^= 0x40
	tests := []struct {
		name, file, content string
		want                string // substring of the one stderr line
	}{
		{"fields", "a.tns", "1 2 3 1.0\n1 2 1.0\n", "a.tns:2:"},
		{"zero index", "b.tns", "1 2 3 1.0\n0 2 3 1.0\n", "b.tns:2:"},
		{"negative index", "c.tns", "1 -2 3 1.0\n", "c.tns:1:"},
		{"non-numeric index", "d.tns", "1 x 3 1.0\n", "d.tns:1:"},
		{"beyond declared dim", "e.tns", "3\n2 2 2\n1 3 1 1.0\n", "e.tns:3:"},
		{"nan", "f.tns", "1 1 1 nan\n", "f.tns:1:"},
		{"inf", "g.tns", "1 1 1 1e39\n", "g.tns:1:"},
		{"empty", "h.tns", "# nothing\n\n", "h.tns"},
		{"overflow", "i.tns", "8\n4294967296 4294967296 4294967296 4294967296 4294967296 4294967296 4294967296 4294967296\n1 1 1 1 1 1 1 1 1.0\n", "i.tns:2:"},
		{"mtx beyond size", "j.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n", "j.mtx:3:"},
		{"mtx complex", "k.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1.0 0\n", "k.mtx:1:"},
		{"truncated binary", "l.stb", string(stb.Bytes()[:len(stb.Bytes())-9]), "l.stb: offset"},
		{"corrupted binary", "m.stb", string(corrupt), "m.stb: offset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, tc.file)
			if err := os.WriteFile(in, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out-"+tc.name+".stb")
			for _, args := range [][]string{{"info", in}, {"convert", in, out}} {
				var stderr bytes.Buffer
				cmd := exec.Command(exe, args...)
				cmd.Stderr = &stderr
				err := cmd.Run()
				if err == nil {
					t.Fatalf("%v: exit 0 on bad input", args)
				}
				msg := stderr.String()
				if strings.Count(msg, "\n") != 1 || strings.Contains(msg, "panic") || !strings.Contains(msg, tc.want) {
					t.Fatalf("%v: stderr %q, want one line containing %q", args, msg, tc.want)
				}
			}
			if entries, _ := filepath.Glob(filepath.Join(dir, "out-*")); len(entries) != 0 {
				t.Fatalf("output left behind: %v", entries)
			}
		})
	}
}

// Where a command writes a file, the place is checked before the work:
// an unknown extension or a missing directory is one line naming the
// setting, not the name of an internal temporary file after the work.
func TestOutputCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	in := writeRandomTensor(t, []int{5, 6, 7}, 30, 2)
	missing := filepath.Join(dir, "nowhere")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", in, filepath.Join(missing, "x.tns")}, "OUT " + filepath.Join(missing, "x.tns") + ": directory " + missing + " does not exist"},
		{[]string{"convert", in, filepath.Join(dir, "x.csv")}, "x.csv: unknown tensor file extension"},
		{[]string{"graph", in, "--png", filepath.Join(missing, "g.png")}, "--png " + filepath.Join(missing, "g.png") + ": directory " + missing + " does not exist"},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// info on a file with a repeated coordinate says it summed it, once, and
// reports a density of at most 1.
func TestInfoSumsDuplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dup.tns")
	if err := os.WriteFile(path, []byte("1 1 1 1\n1 1 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, "info", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(stderr, "duplicate") != 1 {
		t.Errorf("stderr %q: want one note about the summed duplicate", stderr)
	}
	var rep struct {
		NNZ     int     `json:"nnz"`
		Density float64 `json:"density"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("info --json: %v in %q", err, out)
	}
	if rep.NNZ != 1 || rep.Density != 1 {
		t.Errorf("info: nnz %d density %g, want 1 and 1", rep.NNZ, rep.Density)
	}
}

// The default config is sparsetune.yaml (or .yml) in the working
// directory or the user config directory; a file named just "sparsetune"
// (the binary `go build ./cmd/sparsetune` leaves) is not a config.
func TestConfigSearch(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	if err := os.WriteFile("sparsetune", []byte("\x7fELF\x02\x01\x01\x00binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, "info"); err != nil {
		t.Fatalf("info beside a binary named sparsetune: %v\n%s", err, stderr)
	}
	if err := os.WriteFile("sparsetune.yaml", []byte("threads: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "info"); err == nil || !strings.Contains(err.Error(), "sparsetune.yaml") {
		t.Fatalf("a broken sparsetune.yaml: err %v, want one naming it", err)
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputIsNotInput: every command that writes a file refuses to write
// it over its input tensor, by the same path or another name for the
// same file, and leaves the input as it was; --png must name a .png.
func TestOutputIsNotInput(t *testing.T) {
	data, err := os.ReadFile(smallTensor)
	if err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "x.tns")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.tns")
	if err := os.Link(in, other); err != nil {
		other = in // no hard links here: the same path again
	}
	// A matrix, whose MTTKRP --out may be a .mtx.
	mtx := filepath.Join(dir, "m.mtx")
	if err := os.WriteFile(mtx, []byte("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.5\n3 2 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		input string
	}{
		{[]string{"convert", in, in}, in},
		{[]string{"convert", in, other}, in},
		{[]string{"ttm", in, "--out", in}, in},
		{[]string{"mttkrp", mtx, "--out", mtx}, mtx},
		{[]string{"graph", in, "--png", in}, in},
		{[]string{"graph", in, "--png", filepath.Join(dir, "x.jpg")}, ""},
	} {
		before, _ := os.ReadFile(c.args[1])
		_, _, err := run(t, c.args...)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line error", c.args, err)
		} else if c.input != "" && !strings.Contains(err.Error(), "is the input "+c.input) && !strings.Contains(err.Error(), ".png") {
			t.Errorf("%v: %v, want it to name the input", c.args, err)
		}
		if got, _ := os.ReadFile(c.args[1]); !bytes.Equal(got, before) {
			t.Fatalf("%v changed the input", c.args)
		}
	}
	if got, _ := os.ReadFile(in); !bytes.Equal(got, data) {
		t.Fatal("the input changed")
	}
	if _, _, err := run(t, "graph", in, "--png", filepath.Join(dir, "g.png")); err != nil {
		t.Errorf("graph --png of a new file: %v", err)
	}
}

// TestConvertChecksFirst: convert refuses the standard output as OUT, and
// with --compact a map path that cannot be written, before writing the
// tensor (a compact tensor without its map cannot be related back).
func TestConvertChecksFirst(t *testing.T) {
	if _, err := os.Stat(smallTensor); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "c.tns")
	if err := os.Mkdir(out+".index.tsv", 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "convert", smallTensor, out, "--compact")
	if err == nil || !strings.Contains(err.Error(), "OUT.index.tsv "+out+".index.tsv: is a directory") {
		t.Errorf("--compact with a map path that is a directory: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the compact tensor was written without its map")
	}
	if _, _, err := run(t, "convert", smallTensor, "-"); err == nil || !strings.Contains(err.Error(), "not the standard output") {
		t.Errorf("convert to -: %v", err)
	}
}

// TestArgumentErrors: a missing or extra positional argument is named,
// with the command's usage.
func TestArgumentErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cpd", "--rank", "2"}, "missing FILE (usage: sparsetune cpd FILE"},
		{[]string{"convert", "x.tns"}, "missing OUT (usage: sparsetune convert IN OUT"},
		{[]string{"model", "seal"}, "missing FILE (usage: sparsetune model seal FILE"},
		{[]string{"info", "a.tns", "b.tns"}, `unexpected argument "b.tns": info takes at most one FILE`},
		{[]string{"devices", "x"}, `unexpected argument "x": devices takes flags only`},
	} {
		if _, _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestEmptyDeviceList: --devices that names no device is an error, where
// it meant the default devices without a word.
func TestEmptyDeviceList(t *testing.T) {
	for _, args := range [][]string{{"ttm", "--devices", ","}, {"cpd", smallTensor, "--rank", "2", "--devices", " , "}, {"cpapr", smallTensor, "--rank", "2", "--devices", ","}} {
		if _, _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "names no device") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

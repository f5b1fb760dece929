package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "hello"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello" {
		t.Fatalf("%q %v", b, err)
	}
	// A failed write leaves the old file and no temporary file.
	boom := errors.New("boom")
	if err := Write(path, func(w io.Writer) error { io.WriteString(w, "partial"); return boom }); err != boom {
		t.Fatalf("got %v, want the write's own error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "hello" {
		t.Errorf("failed write changed the file to %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".out.txt.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := Write(filepath.Join(dir, "no", "such", "dir"), func(io.Writer) error { return nil }); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	missing := filepath.Join(dir, "no", "such", "dir")
	err := Write(missing, func(io.Writer) error { return nil })
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing+":") || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("writing into a missing directory: %v, want an error naming %s and not the temporary file", err, missing)
	}
}

// TestWriteKeepsMode: a file replaced keeps its permissions; a new one
// gets 0644. A read-only file is replaced only by root; anyone else is
// refused, as opening it to write would refuse them (Replaceable).
func TestWriteKeepsMode(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		existing fs.FileMode // 0: no file yet
		want     fs.FileMode
	}{{"new", 0, 0o644}, {"read-only", 0o444, 0o444}, {"private", 0o600, 0o600}} {
		path := filepath.Join(dir, c.name)
		if c.existing != 0 {
			if err := os.WriteFile(path, []byte("old"), c.existing); err != nil {
				t.Fatal(err)
			}
		}
		err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err })
		if c.existing == 0o444 && os.Geteuid() != 0 {
			if !errors.Is(err, fs.ErrPermission) {
				t.Errorf("%s, not root: %v, want a permission error", c.name, err)
			}
			if b, _ := os.ReadFile(path); string(b) != "old" {
				t.Errorf("%s, not root: the file holds %q, want it untouched", c.name, b)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != c.want {
			t.Errorf("%s: mode %v, %v; want %v", c.name, st.Mode().Perm(), err, c.want)
		}
	}
}

// TestWriteThroughLink: a symbolic link is written through, its target
// replaced and the link kept.
func TestWriteThroughLink(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if err := Write(link, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "new" {
		t.Errorf("target holds %q, %v; want the new content", b, err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", st.Mode(), err)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o600 {
		t.Errorf("target mode %v, want 0600 kept", st.Mode().Perm())
	}
}

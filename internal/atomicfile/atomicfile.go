// Package atomicfile writes a file so that its path never holds a partial
// one: the content goes to a temporary file in the same directory, which
// is synced and renamed over the path, or removed on failure.
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write creates or replaces path with what write writes. A file it
// replaces keeps its permissions; a new one gets mode 0644. An error from
// write is returned as it is; the others name path, not the temporary
// file, which the caller never sees.
func Write(path string, write func(io.Writer) error) (err error) {
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return named(path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return named(path, err)
	}
	if err = tmp.Close(); err != nil {
		return named(path, err)
	}
	if err = os.Chmod(tmp.Name(), mode); err != nil {
		return named(path, err)
	}
	return named(path, os.Rename(tmp.Name(), path))
}

// named returns err, an os error about the temporary file, as one about
// path: the operation and the cause, as a *fs.PathError.
func named(path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &fs.PathError{Op: le.Op, Path: path, Err: le.Err}
	}
	return err
}

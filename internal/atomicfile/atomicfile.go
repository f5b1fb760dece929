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
// replaces must be one the process may write, as for any write, and
// keeps its permissions; a new one gets mode 0644. A symbolic link is
// written through: its target is replaced, the link kept. (Other hard
// links to a replaced file keep the old content: the new file is a new
// inode.) An error from write is returned as it is; the others name
// path, not the temporary file, which the caller never sees.
func Write(path string, write func(io.Writer) error) (err error) {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	if err := Replaceable(path); err != nil {
		return err
	}
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

// WriteBytes is Write of data.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// Replaceable returns nil when Write may replace path: no regular file is
// there, or the process may write the one that is. A rename needs only the
// directory's permission, so the file's own is asked, as opening it to
// write would; the error is the open's.
func Replaceable(path string) error {
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return f.Close()
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

// Package atomicfile writes a file so that its path never holds a partial
// one: the content goes to a temporary file in the same directory, which
// is synced and renamed over the path, or removed on failure.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write creates path (mode 0644) with what write writes. An error from
// write is returned as it is; others are the os package's, naming the
// temporary file.
func Write(path string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
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
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

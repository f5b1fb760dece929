package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

// checkOutPath checks, before any long work, that a file can be created
// at path: its directory exists and takes a new file, and a file already
// there is neither one of the command's inputs (which writing the result
// would destroy) nor one the user may not write. Otherwise the work's
// result would be lost at its end, as a training of minutes was when
// --out named a directory that did not exist. flag names the setting in
// the error.
func checkOutPath(flag, path string, inputs ...string) error {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s %s: is a directory, expected a file name", flag, path)
		}
		for _, in := range inputs {
			if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
				return fmt.Errorf("%s %s: is the input %s, which the result would replace: write it to another file", flag, path, in)
			}
		}
		if err := atomicfile.Replaceable(path); err != nil {
			return fmt.Errorf("%s %s: %w", flag, path, errors.Unwrap(err))
		}
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: directory %s does not exist", flag, path, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, err)
	case !st.IsDir():
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	f, err := os.CreateTemp(dir, ".sparsetune-probe-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot create a file in %s: %w", flag, path, dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// makePlotsDir creates the --plots directory before any long work, so that
// a directory that cannot be made stops the command at once rather than
// after the training it would have drawn.
func makePlotsDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--plots %s: %w", dir, errors.Unwrap(err))
	}
	return nil
}

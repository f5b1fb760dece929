package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

// WriteOptions say where WriteSet reads and writes.
type WriteOptions struct {
	// From is the directory of the source matrices.
	From string
	// Out is the output directory, created if missing.
	Out string
	// Ext is the tensor files' extension: ".stb" (the default), ".tns",
	// either followed by ".gz".
	Ext string
	// Progress, if set, is called after each tensor, written or skipped.
	Progress func(Progress)
	// Warn, if set, is told of each source matrix that cannot be read,
	// whose tensors are left out.
	Warn func(string)
}

// Progress reports one tensor of a WriteSet.
type Progress struct {
	// Index is the tensor's 0-based position in the set of Total.
	Index, Total int
	Entry        Entry
	// Skipped is set when the file was present and complete.
	Skipped bool
	// Elapsed is the time spent on this tensor: reading the matrix,
	// generating and writing.
	Elapsed time.Duration
}

// Summary is what a WriteSet did.
type Summary struct {
	Written, Skipped int
	// Failed lists the source matrices that could not be read, each as
	// "path: why", and Missing counts the tensors left out with them.
	Failed  []string
	Missing int
	// Manifest is the manifest's path.
	Manifest string
	Entries  []Entry
}

// WriteSet generates the tensors specs describes (each needs a Name) into
// opt.Out and records them in its manifest (ManifestName), one line each in
// the order of specs, followed by the lines of files from earlier runs that
// specs does not name.
//
// It is resumable: a tensor whose file is present, with the size its
// manifest line records, and whose manifest line agrees with its spec
// (same source, generators, seed, target and every parameter the spec sets)
// is skipped. Files are written to a temporary name and renamed, and each
// one's manifest line is appended as soon as it is written, so an
// interrupted run loses at most the tensor in progress. A manifest line that
// disagrees with its spec is an error: the directory holds another set. A
// source matrix that does not read has its tensors left out, told to
// opt.Warn and listed in the summary's Failed; the others are made.
func WriteSet(ctx context.Context, specs []Spec, opt WriteOptions) (*Summary, error) {
	ext := opt.Ext
	if ext == "" {
		ext = string(formats.Binary)
	}
	if f, _, err := formats.FormatOf("x" + ext); err != nil || f == formats.MatrixMarket {
		return nil, fmt.Errorf("tensor file extension %q: expected .stb or .tns, optionally followed by .gz", ext)
	}
	if st, err := os.Stat(opt.From); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", opt.From)
	}
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Name == "" || filepath.Base(s.Name) != s.Name {
			return nil, fmt.Errorf("spec %d: name %q: expected a file name without directory", i+1, s.Name)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("spec %d: name %s used twice", i+1, s.Name)
		}
		seen[s.Name] = true
		// A missing matrix fails now, not after hours of generating.
		if src := filepath.Join(opt.From, s.Source); !isFile(src) {
			return nil, fmt.Errorf("%s: no such matrix file (the source of %s)", src, s.Name)
		}
	}
	if err := os.MkdirAll(opt.Out, 0o755); err != nil {
		return nil, err
	}
	manifest := filepath.Join(opt.Out, ManifestName)
	old, err := readManifestFile(manifest)
	if err != nil {
		return nil, err
	}
	byFile := map[string]Entry{}
	for _, e := range old {
		byFile[e.File] = e
	}
	// The manifest is rewritten once now, so that lines appended below
	// follow whole lines even if the last run died mid-line.
	if err := writeManifestFile(manifest, old); err != nil {
		return nil, err
	}
	// A file of another set under the same name fails the run before
	// anything is written.
	for _, s := range specs {
		file := s.Name + ext
		if e, ok := byFile[file]; ok && !agrees(s, e) {
			return nil, fmt.Errorf("%s: the manifest describes another tensor (source %s, %s, seed %d, target %d) than this run's (source %s, %s, seed %d, target %d): use another output directory",
				filepath.Join(opt.Out, file), e.Source, e.Generator, e.Seed, e.TargetNNZ, s.Source, s.Generator(), s.Seed, s.TargetNNZ)
		}
	}
	sum := &Summary{Manifest: manifest}
	bad := map[string]bool{} // sources that could not be read
	var cached struct {
		path string
		m    *formats.COO
	}
	for i, s := range specs {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		start := time.Now()
		file := s.Name + ext
		path := filepath.Join(opt.Out, file)
		if e, ok := byFile[file]; ok {
			if st, err := os.Stat(path); err == nil && st.Size() == e.Bytes && e.Version == Version {
				sum.Skipped++
				sum.Entries = append(sum.Entries, e)
				if opt.Progress != nil {
					opt.Progress(Progress{Index: i, Total: len(specs), Entry: e, Skipped: true, Elapsed: time.Since(start)})
				}
				continue
			}
		}
		src := filepath.Join(opt.From, s.Source)
		if bad[src] {
			sum.Missing++
			continue
		}
		e, err := func() (Entry, error) {
			if cached.path != src {
				m, err := ReadMatrix(src)
				if err != nil {
					return Entry{}, &sourceError{err}
				}
				cached.path, cached.m = src, m
			}
			return writeOne(cached.m, s, path)
		}()
		if se := (*sourceError)(nil); errors.As(err, &se) {
			// One matrix that does not read (or is no matrix a tensor
			// can come from): the others' tensors are still made.
			bad[src] = true
			sum.Missing++
			sum.Failed = append(sum.Failed, err.Error())
			if opt.Warn != nil {
				opt.Warn(err.Error() + ": its tensors are left out")
			}
			continue
		}
		if err != nil {
			return sum, err
		}
		if err := appendManifest(manifest, e); err != nil {
			return sum, err
		}
		byFile[file] = e
		sum.Written++
		sum.Entries = append(sum.Entries, e)
		if opt.Progress != nil {
			opt.Progress(Progress{Index: i, Total: len(specs), Entry: e, Elapsed: time.Since(start)})
		}
	}
	// Final order: this set's tensors in plan order, then the tensors of
	// earlier runs that this set does not name and whose files remain.
	entries := append([]Entry(nil), sum.Entries...)
	done := map[string]bool{}
	for _, e := range sum.Entries {
		done[e.File] = true
	}
	for _, e := range old {
		if last := byFile[e.File]; done[e.File] || !reflect.DeepEqual(last, e) {
			continue // listed already, or superseded by a later line
		}
		if _, err := os.Stat(filepath.Join(opt.Out, e.File)); err == nil {
			entries = append(entries, e)
			done[e.File] = true
		}
	}
	return sum, writeManifestFile(manifest, entries)
}

// writeOne generates the tensor of s from m into path.
func writeOne(m *formats.COO, s Spec, path string) (Entry, error) {
	src, err := canonicalMatrix(m)
	if err != nil {
		return Entry{}, &sourceError{fmt.Errorf("%s: %w", s.Source, err)}
	}
	r, err := s.resolve(src.NNZ(), src.Dims)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", s.Name, err)
	}
	t, err := r.run(src)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", s.Name, err)
	}
	if err := formats.WriteFile(path, t); err != nil {
		return Entry{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return Entry{}, err
	}
	return newEntry(filepath.Base(path), r, src, t, st.Size()), nil
}

// sourceError is a problem of a source matrix, whose tensors WriteSet
// leaves out while it makes the others'.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// agrees reports whether entry e records the tensor of the planned spec s:
// resolved for e's source matrix, s is e's spec.
func agrees(s Spec, e Entry) bool {
	if s.Name != e.Name || s.Source != e.Source || s.Seed != e.Seed || s.TargetNNZ != e.TargetNNZ {
		return false
	}
	r, err := s.resolve(e.SourceNNZ, e.SourceDims)
	return err == nil && reflect.DeepEqual(r.Stages, e.Stages)
}

// isFile reports whether path names a regular file (through links).
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// readManifestFile reads the manifest at path, absent meaning empty. An
// unterminated last line is what a run killed while appending leaves
// behind: it is dropped (its tensor is generated again), not an error.
func readManifestFile(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	return ReadManifest(bytes.NewReader(data), path)
}

// writeManifestFile replaces the manifest at path with entries.
func writeManifestFile(path string, entries []Entry) error {
	return atomicfile.Write(path, func(w io.Writer) error { return WriteManifest(w, entries) })
}

// appendManifest appends e's line to the manifest at path.
func appendManifest(path string, e Entry) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := WriteManifest(f, []Entry{e}); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// RebuildSet writes into opt.Out the tensors that entries (a manifest's
// lines, or some of them) describe, generated again from their source
// matrices in opt.From, and checks each against its line: same dims,
// nonzeros and checksum. It is how a labels file's tensors come back on
// another machine without copying them: only the manifest and the
// matrices travel. opt.Ext is taken from the entries' file names, which
// must share one extension. Like WriteSet it resumes: tensors present with
// their recorded size are skipped.
func RebuildSet(ctx context.Context, entries []Entry, opt WriteOptions) (*Summary, error) {
	if len(entries) == 0 {
		return nil, errors.New("the manifest lists no tensors")
	}
	specs := make([]Spec, len(entries))
	want := make(map[string]Entry, len(entries))
	ext := ""
	for i, e := range entries {
		if err := e.rebuildable(); err != nil {
			return nil, err
		}
		if e.Name == "" || !strings.HasPrefix(e.File, e.Name) {
			return nil, fmt.Errorf("%s: the manifest line's name %q is not the file's name without its extension", e.File, e.Name)
		}
		x := strings.TrimPrefix(e.File, e.Name)
		if i == 0 {
			ext = x
		} else if x != ext {
			return nil, fmt.Errorf("%s: extension %q, the manifest's first tensor has %q: rebuild one extension at a time", e.File, x, ext)
		}
		specs[i] = e.Spec.clone()
		want[e.File] = e
	}
	opt.Ext = ext
	sum, err := WriteSet(ctx, specs, opt)
	if err != nil {
		return sum, err
	}
	for _, got := range sum.Entries {
		if err := want[got.File].sameTensor(filepath.Join(opt.Out, got.File), got.Dims, got.NNZ, got.CRC32C); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// ReadManifestFile reads the manifest at path (see ReadManifest).
func ReadManifestFile(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadManifest(f, path)
}

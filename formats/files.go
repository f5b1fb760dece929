package formats

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

// FileFormat names a tensor file format.
type FileFormat string

// The file formats, chosen by extension; each may be followed by ".gz".
const (
	FROSTT       FileFormat = ".tns"
	MatrixMarket FileFormat = ".mtx"
	Binary       FileFormat = ".stb"
)

// FormatOf returns the file format of path from its extension and whether it
// is gzipped.
func FormatOf(path string) (FileFormat, bool, error) {
	base := strings.ToLower(filepath.Base(path))
	gz := strings.HasSuffix(base, ".gz")
	base = strings.TrimSuffix(base, ".gz")
	switch f := FileFormat(filepath.Ext(base)); f {
	case FROSTT, MatrixMarket, Binary:
		return f, gz, nil
	}
	return "", false, fmt.Errorf("%s: unknown tensor file extension: expected .tns, .mtx or .stb, optionally followed by .gz", path)
}

// ReadFile reads the tensor in path, choosing the format by extension
// (.tns, .mtx, .stb, each optionally gzipped as .gz). Nonzeros with the
// same coordinate are summed into one, as MatrixMarket tools do (a file
// without duplicates keeps its order); ReadFileSummed also says how many
// were merged.
func ReadFile(path string) (*COO, error) {
	t, _, err := ReadFileSummed(path)
	return t, err
}

// ReadFileSummed is ReadFile that also returns the number of nonzeros
// removed by summing duplicates, so that a caller can tell its user.
func ReadFileSummed(path string) (*COO, int, error) {
	t, err := readFile(path, nil)
	if err != nil {
		return nil, 0, err
	}
	summed, err := t.SumDuplicates()
	if err != nil {
		return nil, 0, fileError(path, "%v", err)
	}
	return t, summed, nil
}

// Stdin is the path that names the standard input, whose format is told
// by its first bytes (sniff), not by a name: `zcat x.tns.gz | sparsetune
// info -`. Errors name it "stdin".
const Stdin = "-"

// readFile reads path as it is stored, duplicates included, picking as
// pk says (nil: nothing).
func readFile(path string, pk *picker) (*COO, error) {
	var r io.Reader
	var format FileFormat
	var gz bool
	size := int64(-1)
	stdin := path == Stdin
	if stdin {
		path = "stdin"
		br := bufio.NewReaderSize(os.Stdin, 1<<20)
		format, gz = sniff(br)
		r = br
	} else {
		var err error
		if format, gz, err = FormatOf(path); err != nil {
			return nil, err
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		st, err := f.Stat()
		switch {
		case err == nil && st.IsDir():
			return nil, fileError(path, "is a directory, expected a tensor file")
		case err == nil && st.Mode().IsRegular() && !gz:
			size = st.Size()
		}
		r = f
		if gz {
			r = bufio.NewReaderSize(f, 1<<20)
		}
	}
	var zr *failedReader
	if gz {
		z, err := gzip.NewReader(r)
		switch {
		case err != nil && stdin:
			return nil, fileError(path, "corrupted gzip stream: %v", err)
		case err != nil:
			return nil, fileError(path, "expected a gzip stream (the name ends in .gz): %v", err)
		}
		defer z.Close()
		zr = &failedReader{r: z}
		r = zr
		if stdin {
			br := bufio.NewReaderSize(zr, 1<<20)
			format, _ = sniff(br)
			r = br
		}
	}
	var t *COO
	var err error
	switch format {
	case FROSTT:
		t, err = readTNS(skipBOM(r), path, pk)
	case MatrixMarket:
		t, err = ReadMTX(skipBOM(r), path)
	case Binary:
		t, err = readBinary(r, path, size, pk)
	}
	if gz && zr.err != nil {
		// The stream broke: what the parser made of the text it had
		// (a cut line, a short array) is not the cause.
		return nil, gzipError(path, zr.err)
	}
	if err != nil {
		return nil, gzipError(path, err)
	}
	if gz {
		// Reading to the end checks the gzip trailer (CRC and length).
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, gzipError(path, err)
		}
	}
	return t, nil
}

// sniff tells the format of the stream in br by its first bytes, without
// consuming them: gzip's magic, the .stb magic, a MatrixMarket banner, or
// else FROSTT text.
func sniff(br *bufio.Reader) (format FileFormat, gz bool) {
	head, _ := br.Peek(len(stbMagic))
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "", true
	case string(head) == stbMagic:
		return Binary, false
	}
	head, _ = br.Peek(3 + len(mmBanner))
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	if len(head) >= len(mmBanner) && strings.EqualFold(string(head[:len(mmBanner)]), mmBanner) {
		return MatrixMarket, false
	}
	return FROSTT, false
}

// mmBanner starts a MatrixMarket file.
const mmBanner = "%%MatrixMarket"

// skipBOM returns r without the UTF-8 byte order mark that some editors
// write at the start of a text file, where the parsers would read it as
// part of the first field.
func skipBOM(r io.Reader) io.Reader {
	var head [3]byte
	n, _ := io.ReadFull(r, head[:])
	if n == 3 && head == [3]byte{0xef, 0xbb, 0xbf} {
		return r
	}
	// A read error that cut the head short comes again from r.
	return io.MultiReader(bytes.NewReader(head[:n]), r)
}

// failedReader passes on r's reads and keeps its first error other than
// io.EOF.
type failedReader struct {
	r   io.Reader
	err error
}

func (f *failedReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF && f.err == nil {
		f.err = err
	}
	return n, err
}

// gzipError names the file in errors that come from the gzip layer: a
// checksum or header error, and the end of a truncated stream, which a
// reader of the text inside sees as a bare "unexpected EOF".
func gzipError(path string, err error) error {
	switch {
	case errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader):
		return fileError(path, "corrupted gzip stream: %v", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		var pe *ParseError
		if !errors.As(err, &pe) {
			return fileError(path, "truncated gzip stream: %v", err)
		}
	}
	return err
}

// WriteFile writes t to path in the format its extension names. The data
// goes to a temporary file in the same directory that is synced and then
// renamed over path, so path never holds a partial tensor; on failure the
// temporary file is removed.
func WriteFile(path string, t *COO) error {
	format, gz, err := FormatOf(path)
	if err != nil {
		return err
	}
	if err := t.checkArrays(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if format == MatrixMarket && t.Order() != 2 {
		return fmt.Errorf("%s: MatrixMarket holds matrices: expected an order-2 tensor, found order %d", path, t.Order())
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		var w io.Writer = bw
		var zw *gzip.Writer
		if gz {
			zw = gzip.NewWriter(bw)
			w = zw
		}
		var err error
		switch format {
		case FROSTT:
			err = WriteTNS(w, t)
		case MatrixMarket:
			err = WriteMTX(w, t)
		case Binary:
			err = WriteBinary(w, t)
		}
		if err == nil && zw != nil {
			err = zw.Close()
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	})
}

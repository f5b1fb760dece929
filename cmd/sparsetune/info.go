package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
	"github.com/sparsetune/sparsetune/internal/sample"
)

func newInfoCmd(v *viper.Viper) *cobra.Command {
	return &cobra.Command{
		Use:   "info [FILE]",
		Short: "Describe a tensor: dims, nonzeros, slices and fibers per mode, bytes per format",
		Long: `Describe a tensor: dims, nonzeros, density and, per mode (1-based), the
non-empty slices and fibers with nonzeros per slice and per fiber, and the
bytes each storage format needs to hold it.

Without FILE, info describes the embedded sample tensor.`,
		Args: optionalArg("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, t, readTime, err := loadTensor(cmd.ErrOrStderr(), args)
			if err != nil {
				return err
			}
			desc, err := formats.Describe(t)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			rep := newInfoReport(name, desc, readTime)
			if v.GetBool("json") {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.writeTable(cmd.OutOrStdout())
		},
	}
}

// loadTensor reads the tensor named by args[0], or the embedded sample when
// args is empty, and validates it.
func loadTensor(stderr io.Writer, args []string) (string, *formats.COO, time.Duration, error) {
	start := time.Now()
	if len(args) == 0 {
		fmt.Fprintf(stderr, "no FILE given: using the embedded sample tensor %s\n", sample.Name)
		t, err := sample.Tensor()
		return sample.Name, t, time.Since(start), err
	}
	t, err := readTensor(stderr, args[0])
	if err != nil {
		return args[0], nil, 0, err
	}
	return args[0], t, time.Since(start), nil
}

// loadTensorPicked is loadTensor for a command that summarizes the tensor
// (features.Summarize): unless pick is false, the reader also picks the
// summary's sample as it passes over the nonzeros (formats.ReadFilePicked).
// The picks are nil for the embedded sample tensor and where the reader
// made none.
func loadTensorPicked(stderr io.Writer, args []string, pick bool) (string, *formats.COO, *formats.Picks, time.Duration, error) {
	if len(args) == 0 || !pick {
		name, t, read, err := loadTensor(stderr, args)
		return name, t, nil, read, err
	}
	start := time.Now()
	t, picks, summed, err := formats.ReadFilePicked(args[0], features.PickPositions)
	if err != nil {
		return args[0], nil, nil, 0, err
	}
	noteSummed(stderr, args[0], summed, t)
	return args[0], t, picks, time.Since(start), nil
}

// readTensor reads the tensor in path, summing duplicate coordinates, and
// says once on stderr when it had any: the file and the tensor then differ.
func readTensor(stderr io.Writer, path string) (*formats.COO, error) {
	t, summed, err := formats.ReadFileSummed(path)
	if err != nil {
		return nil, err
	}
	noteSummed(stderr, path, summed, t)
	return t, nil
}

// noteSummed says on stderr that the file at path had summed duplicate
// coordinates, if it had any, and how many nonzeros t kept.
func noteSummed(stderr io.Writer, path string, summed int, t *formats.COO) {
	if summed > 0 {
		fmt.Fprintf(stderr, "%s: summed %d duplicate coordinates into their first occurrence (%d nonzeros remain)\n", path, summed, t.NNZ())
	}
}

// infoReport is what info prints; modes are 1-based.
type infoReport struct {
	File        string         `json:"file"`
	Order       int            `json:"order"`
	Dims        []int          `json:"dims"`
	NNZ         int            `json:"nnz"`
	Density     float64        `json:"density"`
	ReadSeconds float64        `json:"read_seconds"`
	Modes       []modeReport   `json:"modes"`
	Formats     []formatReport `json:"formats"`
}

type modeReport struct {
	Mode        int         `json:"mode"`
	Dim         int         `json:"dim"`
	Slices      int         `json:"slices"`
	Fibers      int         `json:"fibers"`
	NNZPerSlice summaryJSON `json:"nnz_per_slice"`
	NNZPerFiber summaryJSON `json:"nnz_per_fiber"`
}

type summaryJSON struct {
	Min  int     `json:"min"`
	Mean float64 `json:"mean"`
	Max  int     `json:"max"`
	Std  float64 `json:"std"`
}

type formatReport struct {
	Format       string  `json:"format"`
	Mode         int     `json:"mode,omitempty"` // 0 for formats not tied to a mode
	Bytes        int64   `json:"bytes"`
	BytesPerNNZ  float64 `json:"bytes_per_nnz"`
	PaddingRatio float64 `json:"padding_ratio"`
	Seconds      float64 `json:"convert_seconds"` // -1: too large to build, size computed
}

func toSummaryJSON(s formats.Summary) summaryJSON {
	return summaryJSON{Min: s.Min, Mean: s.Mean, Max: s.Max, Std: s.Std}
}

func newInfoReport(name string, d *formats.Description, read time.Duration) *infoReport {
	r := &infoReport{File: name, Order: len(d.Dims), Dims: d.Dims, NNZ: d.NNZ, Density: d.Density, ReadSeconds: read.Seconds()}
	for _, m := range d.Modes {
		r.Modes = append(r.Modes, modeReport{
			Mode: m.Mode + 1, Dim: m.Dim, Slices: m.Slices.Count, Fibers: m.Fibers.Count,
			NNZPerSlice: toSummaryJSON(m.Slices), NNZPerFiber: toSummaryJSON(m.Fibers),
		})
	}
	for _, f := range d.Footprints {
		mode := 0
		if f.Mode >= 0 {
			mode = f.Mode + 1
		}
		r.Formats = append(r.Formats, formatReport{Format: f.Format, Mode: mode, Bytes: f.Bytes, BytesPerNNZ: f.BytesPerNNZ(d.NNZ), PaddingRatio: f.PaddingRatio, Seconds: f.Seconds})
	}
	return r
}

func (r *infoReport) writeTable(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "file\t%s\n", r.File)
	fmt.Fprintf(w, "dims\t%s (order %d)\n", formats.FormatDims(r.Dims), r.Order)
	fmt.Fprintf(w, "nnz\t%d\n", r.NNZ)
	fmt.Fprintf(w, "density\t%.3g\n", r.Density)
	fmt.Fprintf(w, "read\t%.3fs\n\n", r.ReadSeconds)
	fmt.Fprintln(w, "mode\tdim\tslices\tfibers\tnnz/slice min\tmean\tmax\tnnz/fiber min\tmean\tmax")
	for _, m := range r.Modes {
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%.2f\t%d\n", m.Mode, m.Dim, m.Slices, m.Fibers,
			m.NNZPerSlice.Min, m.NNZPerSlice.Mean, m.NNZPerSlice.Max,
			m.NNZPerFiber.Min, m.NNZPerFiber.Mean, m.NNZPerFiber.Max)
	}
	fmt.Fprintln(w, "\nformat\tmode\tbytes\tbytes/nnz\tpadding\tconvert")
	for _, f := range r.Formats {
		mode := "-"
		if f.Mode > 0 {
			mode = fmt.Sprint(f.Mode)
		}
		conv := fmt.Sprintf("%.2fms", 1e3*f.Seconds)
		if f.Seconds < 0 {
			conv = "not built (size computed)"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%.2f\t%.3f\t%s\n", f.Format, mode, f.Bytes, f.BytesPerNNZ, f.PaddingRatio, conv)
	}
	return w.Flush()
}

func newConvertCmd(v *viper.Viper) *cobra.Command {
	var compact bool
	cmd := &cobra.Command{
		Use:   "convert IN OUT [--compact]",
		Short: "Convert a tensor between file formats, chosen by extension (.tns, .mtx, .stb, each optionally .gz)",
		Long: `Convert a tensor between file formats, chosen by extension (.tns, .mtx,
.stb, each optionally .gz).

--compact renumbers each mode's indices 1, 2, … in increasing order of the
ones the nonzeros use, leaving out the unused ones, so the dims shrink to
the non-empty slices. Kernels and decompositions size their dense factors
by the dims: a tensor whose indices are identifiers (dims of 10^9, a few
thousand used) needs far less memory compacted. OUT.index.tsv then maps
the new indices back: one line per (mode, new index) with the original,
all 1-based, under a header "mode	index	original". Row j of a factor of
the compact tensor is row original of the tensor's, and the rows of unused
indices are zero.`,
		Args: exactArgs("IN", "OUT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] == "-" {
				return errors.New("OUT -: convert writes files, not the standard output: name a file (its extension says the format)")
			}
			if _, _, err := formats.FormatOf(args[1]); err != nil {
				return err
			}
			if err := checkOutPath("OUT", args[1], args[0]); err != nil {
				return err
			}
			if compact {
				// Checked before the tensor is written: a compact tensor
				// without its map cannot be related back to the input.
				if err := checkOutPath("OUT.index.tsv", args[1]+".index.tsv", args[0]); err != nil {
					return err
				}
			}
			start := time.Now()
			t, err := readTensor(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			read := time.Since(start)
			var orig [][]uint32
			if compact {
				if t, orig, err = t.Compact(); err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
			}
			if err := formats.WriteFile(args[1], t); err != nil {
				return err
			}
			if compact {
				if err := writeIndexMap(args[1]+".index.tsv", orig); err != nil {
					return err
				}
			}
			st, err := os.Stat(args[1])
			if err != nil {
				return err
			}
			rep := convertReport{In: args[0], Out: args[1], Dims: t.Dims, NNZ: t.NNZ(), Bytes: st.Size(),
				ReadSeconds: read.Seconds(), WriteSeconds: (time.Since(start) - read).Seconds()}
			if compact {
				rep.IndexMap = args[1] + ".index.tsv"
			}
			if v.GetBool("json") {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s -> %s: %s, %d nonzeros, %d bytes (read %.3fs, write %.3fs)\n",
				rep.In, rep.Out, formats.FormatDims(rep.Dims), rep.NNZ, rep.Bytes, rep.ReadSeconds, rep.WriteSeconds)
			if err == nil && rep.IndexMap != "" {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "original indices of the compact ones: %s\n", rep.IndexMap)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&compact, "compact", false, "renumber each mode's used indices 1, 2, … and write OUT.index.tsv, the map back to the original ones")
	return cmd
}

// writeIndexMap writes the original index of each compact index, 1-based,
// one line per (mode, index), atomically.
func writeIndexMap(path string, orig [][]uint32) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		if _, err := io.WriteString(bw, "mode\tindex\toriginal\n"); err != nil {
			return err
		}
		var line []byte
		for m, inds := range orig {
			for j, i := range inds {
				line = strconv.AppendInt(line[:0], int64(m+1), 10)
				line = append(line, '\t')
				line = strconv.AppendInt(line, int64(j+1), 10)
				line = append(line, '\t')
				line = strconv.AppendUint(line, uint64(i)+1, 10)
				line = append(line, '\n')
				if _, err := bw.Write(line); err != nil {
					return err
				}
			}
		}
		return bw.Flush()
	})
}

type convertReport struct {
	In           string  `json:"in"`
	Out          string  `json:"out"`
	Dims         []int   `json:"dims"`
	NNZ          int     `json:"nnz"`
	Bytes        int64   `json:"bytes"`
	ReadSeconds  float64 `json:"read_seconds"`
	WriteSeconds float64 `json:"write_seconds"`
	IndexMap     string  `json:"index_map,omitempty"` // --compact: the map back to the original indices
}

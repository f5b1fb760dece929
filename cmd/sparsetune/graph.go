package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/brewer"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

func init() { register(newGraphCmd) }

func newGraphCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "graph [FILE]",
		Short: "Show what the predictor sees: global features and the bipartite graph",
		Long: `Lower a tensor for one op and mode (1-based) the way the predictor does:
the mapping matrix of the slice shape, its weighted bipartite graph bucketed
to the node budget, the five statistics of each node, and the global
features (docs/graph.md says what each is and its range).

--png draws the normalised biadjacency the model reads as a heat map:
one cell per row node and column node, darker for more nonzeros, white
where there are none.

Without FILE, graph lowers the embedded sample tensor.`,
		Args: optionalArg("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op, err := hetero.ParseOp(v.GetString("graph.op"))
			if err != nil {
				return fmt.Errorf("--op: %w", err)
			}
			mode, err := strconv.Atoi(v.GetString("graph.mode"))
			if err != nil || mode < 1 {
				return fmt.Errorf("--mode: expected a 1-based mode, found %q", v.GetString("graph.mode"))
			}
			if png := v.GetString("graph.png"); png != "" {
				if !strings.EqualFold(filepath.Ext(png), ".png") {
					return fmt.Errorf("--png %s: expected a file name ending in .png (the picture is a PNG)", png)
				}
				if err := checkOutPath("--png", png, args...); err != nil {
					return err
				}
			}
			name, t, _, err := loadTensor(cmd.ErrOrStderr(), args)
			if err != nil {
				return err
			}
			if mode > t.Order() {
				return fmt.Errorf("--mode: %s has modes 1 to %d, found %d", name, t.Order(), mode)
			}
			rep, g, err := newGraphReport(name, t, op, mode-1)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if png := v.GetString("graph.png"); png != "" {
				if err := writeHeatMap(png, rep, g); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", png)
			}
			if v.GetBool("json") {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.writeText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.String("op", "ttm", "operation: ttm or mttkrp")
	f.String("mode", "1", "mode (1-based)")
	f.String("png", "", "write the biadjacency heat map to this PNG file")
	for _, name := range []string{"op", "mode", "png"} {
		_ = v.BindPFlag("graph."+name, f.Lookup(name))
	}
	return cmd
}

// graphReport is graph's output; modes are 1-based.
type graphReport struct {
	Tensor          string                        `json:"tensor"`
	Dims            []int                         `json:"dims"`
	NNZ             int                           `json:"nnz"`
	Op              string                        `json:"op"`
	Mode            int                           `json:"mode"`
	RowMode         int                           `json:"row_mode"` // the mapping matrix's row mode
	ColMode         int                           `json:"col_mode"`
	Budget          [2]int                        `json:"budget"` // row and column nodes
	Exact           bool                          `json:"exact"`
	SampleNNZ       int                           `json:"sample_nnz"` // the nonzeros the graph was made from: all of them, or the summary's sample
	Rows            graphSide                     `json:"rows"`
	Cols            graphSide                     `json:"cols"`
	Edges           int                           `json:"edges"` // node pairs with a nonzero weight
	Features        []featureValue                `json:"features"`
	FeaturesSeconds float64                       `json:"features_seconds"`
	EncodeSeconds   float64                       `json:"encode_seconds"`
	NodeFeatures    [graphenc.NodeFeatures]string `json:"node_features"`
}

// graphSide describes the row or column nodes of the graph.
type graphSide struct {
	NonEmpty int `json:"non_empty"` // non-empty rows (columns) of the mapping matrix
	Nodes    int `json:"nodes"`     // nodes in use, at most the budget
	// Min, Mean and Max of each node feature over the nodes in use.
	Min  [graphenc.NodeFeatures]float64 `json:"min"`
	Mean [graphenc.NodeFeatures]float64 `json:"mean"`
	Max  [graphenc.NodeFeatures]float64 `json:"max"`
}

type featureValue struct {
	Name  string     `json:"name"`
	Value float64    `json:"value"`
	Range [2]float64 `json:"range"`
}

// newGraphReport computes what a predictor sees, as it does: the global
// features and the graph both from the tensor's summary (its sample, past
// features.ExactNNZ nonzeros).
func newGraphReport(name string, t *formats.COO, op hetero.Op, mode int) (*graphReport, *graphenc.Graph, error) {
	shape, err := graphenc.ShapeFor(op, t.Dims, mode)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	s, err := features.Summarize(t)
	if err != nil {
		return nil, nil, err
	}
	fv, err := s.Global(op, mode)
	if err != nil {
		return nil, nil, err
	}
	featTime := time.Since(start)
	start = time.Now()
	g, err := graphenc.Encode(s.Sample, shape, graphenc.DefaultBudget)
	if err != nil {
		return nil, nil, err
	}
	rep := &graphReport{Tensor: name, Dims: t.Dims, NNZ: t.NNZ(), Op: op.String(), Mode: mode + 1,
		RowMode: shape.Rows + 1, ColMode: shape.Cols + 1, Budget: [2]int{g.Budget.Rows, g.Budget.Cols}, Exact: g.Exact && s.Exact, SampleNNZ: s.Sample.NNZ(),
		Rows:            describeSide(g.NonEmptyRows, g.RowNodes, g.RowFeat),
		Cols:            describeSide(g.NonEmptyCols, g.ColNodes, g.ColFeat),
		FeaturesSeconds: featTime.Seconds(), EncodeSeconds: time.Since(start).Seconds(), NodeFeatures: graphenc.NodeFeatureNames}
	for _, w := range g.Weights {
		if w > 0 {
			rep.Edges++
		}
	}
	for i, nv := range fv.Describe() {
		rep.Features = append(rep.Features, featureValue{Name: nv.Name, Value: nv.Value, Range: features.Ranges[i]})
	}
	return rep, g, nil
}

func describeSide(nonEmpty, nodes int, feat []float32) graphSide {
	s := graphSide{NonEmpty: nonEmpty, Nodes: nodes}
	for f := range graphenc.NodeFeatures {
		s.Min[f], s.Max[f] = math.Inf(1), math.Inf(-1)
		for n := range nodes {
			x := float64(feat[n*graphenc.NodeFeatures+f])
			s.Min[f], s.Max[f] = min(s.Min[f], x), max(s.Max[f], x)
			s.Mean[f] += x / float64(nodes)
		}
		if nodes == 0 {
			s.Min[f], s.Max[f] = 0, 0
		}
	}
	return s
}

// inSample says, where the graph was made from the summary's sample, that
// its counts are the sample's, not the tensor's; else "".
func (r *graphReport) inSample() string {
	if r.SampleNNZ < r.NNZ {
		return fmt.Sprintf(" in a sample of %d nonzeros", r.SampleNNZ)
	}
	return ""
}

func (r *graphReport) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	exact := "bucketed"
	if r.Exact {
		exact = "exact"
	}
	fmt.Fprintf(tw, "tensor\t%s: dims %v, %d nonzeros\n", r.Tensor, r.Dims, r.NNZ)
	fmt.Fprintf(tw, "lowering\t%s mode %d: mapping matrix of mode %d (rows) by mode %d (columns)\n", r.Op, r.Mode, r.RowMode, r.ColMode)
	fmt.Fprintf(tw, "graph\t%d row nodes for %d non-empty rows, %d column nodes for %d non-empty columns%s (budget %dx%d, %s); %d edges\n",
		r.Rows.Nodes, r.Rows.NonEmpty, r.Cols.Nodes, r.Cols.NonEmpty, r.inSample(), r.Budget[0], r.Budget[1], exact, r.Edges)
	fmt.Fprintf(tw, "time\tfeatures %.2f ms, encoding %.2f ms\n", r.FeaturesSeconds*1e3, r.EncodeSeconds*1e3)
	fmt.Fprintf(tw, "\nglobal feature\tvalue\trange\n")
	for _, f := range r.Features {
		fmt.Fprintf(tw, "%s\t%.4g\t[%.3g, %.3g]\n", f.Name, f.Value, f.Range[0], f.Range[1])
	}
	fmt.Fprintf(tw, "\nnode feature\trows min\tmean\tmax\tcolumns min\tmean\tmax\n")
	for i, name := range r.NodeFeatures {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", name,
			r.Rows.Min[i], r.Rows.Mean[i], r.Rows.Max[i], r.Cols.Min[i], r.Cols.Mean[i], r.Cols.Max[i])
	}
	return tw.Flush()
}

// biadjacency is the graph's normalised biadjacency as a plotter grid:
// x the column node, y the row node.
type biadjacency struct{ g *graphenc.Graph }

func (b biadjacency) Dims() (c, r int)   { return max(b.g.ColNodes, 1), max(b.g.RowNodes, 1) }
func (b biadjacency) X(c int) float64    { return float64(c) }
func (b biadjacency) Y(r int) float64    { return float64(r) }
func (b biadjacency) Z(c, r int) float64 { return float64(b.g.Adj[r*b.g.Budget.Cols+c]) }

// writeHeatMap draws the biadjacency to a PNG, written to a temporary file
// beside path and renamed, so a failed run leaves no partial image.
func writeHeatMap(path string, r *graphReport, g *graphenc.Graph) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s mode %d: mode %d × mode %d, %s", filepath.Base(r.Tensor), r.Op, r.Mode, r.RowMode, r.ColMode,
		map[bool]string{true: "exact", false: "bucketed"}[r.Exact])
	p.X.Label.Text = fmt.Sprintf("column node (mode %d, %d non-empty%s)", r.ColMode, r.Cols.NonEmpty, r.inSample())
	p.Y.Label.Text = fmt.Sprintf("row node (mode %d, %d non-empty%s)", r.RowMode, r.Rows.NonEmpty, r.inSample())
	// A sequential palette: more nonzeros is darker on a white page.
	pal, err := brewer.GetPalette(brewer.TypeSequential, "YlGnBu", 9)
	if err != nil {
		return fmt.Errorf("--png %s: %w", path, err)
	}
	h := plotter.NewHeatMap(biadjacency{g}, pal)
	h.Min, h.Max = 1e-9, 1
	h.Underflow = color.White
	p.Add(h)
	wt, err := p.WriterTo(6*vg.Inch, 6*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("--png %s: %w", path, err)
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := wt.WriteTo(w); return err }); err != nil {
		return fmt.Errorf("--png %s: %w", path, err)
	}
	return nil
}

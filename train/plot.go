package train

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/brewer"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

// WritePlots draws the report's figures as PNG files in dir (created when
// missing) and returns their paths:
//
//   - curves-OP.png: each final GCN's loss and accuracy per epoch, on the
//     training and the validation examples (Fit's reports only);
//   - confusion-OP-CLASS.png (a / in the class becomes -): per head, how often each fastest format
//     (row) met each pick (column) of the predictor the model answers
//     with (PredictorDefault: the rule, the trees, their blend with the
//     network, or the network, as each head chose), or of the GCN where
//     the report has no such picks; out-of-fold for Fit;
//   - oracle-by-nnz.png: the oracle ratio of the GCN, the baselines and
//     the rule per nonzero bucket (NNZBuckets).
//
// Each file is written to a temporary file and renamed.
func WritePlots(dir string, rep *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	var paths []string
	for _, c := range rep.Curves {
		path := filepath.Join(dir, "curves-"+c.Op+".png")
		if err := writeCurves(path, c); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	if shown := answeringPicks(rep); shown != nil {
		ops, classes := opsAndClasses(rep.Rows)
		for _, op := range ops {
			for _, class := range classes[op.String()] {
				// A cpu class split by inner loops ("cpu/avx2+pext") names
				// a file, not a directory: confusion-mttkrp-cpu-avx2+pext.png.
				path := filepath.Join(dir, fmt.Sprintf("confusion-%s-%s.png", op, strings.ReplaceAll(class, "/", "-")))
				if err := writeConfusion(path, rep.Rows, *shown, op, class); err != nil {
					return paths, err
				}
				paths = append(paths, path)
			}
		}
	}
	path := filepath.Join(dir, "oracle-by-nnz.png")
	if err := writeRatioByBucket(path, rep); err != nil {
		return paths, err
	}
	return append(paths, path), nil
}

// answeringPicks returns the picks the confusion matrices show: what a
// user of the model gets, the picks of the predictor each head answers
// with (PredictorDefault), not the network's where a head answers
// otherwise; the GCN's where the report has none; nil where it has
// neither.
func answeringPicks(rep *Report) *Picks {
	for _, name := range []string{PredictorDefault, PredictorGCN} {
		for i := range rep.Picks {
			if rep.Picks[i].Predictor == name {
				return &rep.Picks[i]
			}
		}
	}
	return nil
}

// savePNG draws plots side by side, each w by h, into path atomically.
func savePNG(path string, w, h vg.Length, plots ...*plot.Plot) error {
	img := vgimg.New(w*vg.Length(len(plots)), h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	err := atomicfile.Write(path, func(wr io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(wr)
		return err
	})
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// line adds a named series y[0..] at epochs 1.. to p.
func line(p *plot.Plot, name string, y []float64, i int, dashed bool) error {
	if len(y) == 0 {
		return nil
	}
	xy := make(plotter.XYs, len(y))
	for e, v := range y {
		xy[e] = plotter.XY{X: float64(e + 1), Y: v}
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// epochTicks are the default ticks of an axis of epochs, whole numbers
// only: an epoch 2.5 does not exist.
type epochTicks struct{}

func (epochTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if t.Value == math.Trunc(t.Value) {
			if t.Label != "" {
				t.Label = strconv.Itoa(int(t.Value))
			}
			out = append(out, t)
		}
	}
	return out
}

// distinctTicks are gonum's default ticks with labels of as many
// decimals as tell them apart: on a narrow range, such as a loss curve
// between 1.06 and 1.14, the default labels 1.075, 1.1 and 1.125 all
// "1.1".
type distinctTicks struct{}

func (distinctTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := (plot.DefaultTicks{}).Ticks(lo, hi)
	for digits := 0; digits <= 8 && repeated(ticks); digits++ {
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', digits, 64)
			}
		}
	}
	return ticks
}

// repeated reports whether two labelled ticks have the same label.
func repeated(ticks []plot.Tick) bool {
	seen := map[string]bool{}
	for _, t := range ticks {
		if t.Label == "" {
			continue
		}
		if seen[t.Label] {
			return true
		}
		seen[t.Label] = true
	}
	return false
}

func writeCurves(path string, c Curve) error {
	loss, acc := plot.New(), plot.New()
	loss.Title.Text = fmt.Sprintf("%s GCN: loss (best epoch %d)", c.Op, c.BestEpoch)
	loss.X.Label.Text, loss.Y.Label.Text = "epoch", "mean NLL per labelled head"
	acc.Title.Text = fmt.Sprintf("%s GCN: accuracy (%d training, %d validation examples)", c.Op, c.TrainExamples, c.ValExamples)
	acc.X.Label.Text, acc.Y.Label.Text = "epoch", "accuracy"
	acc.Y.Min, acc.Y.Max = 0, 1
	loss.X.Tick.Marker, acc.X.Tick.Marker = epochTicks{}, epochTicks{}
	loss.Y.Tick.Marker, acc.Y.Tick.Marker = distinctTicks{}, distinctTicks{}
	for _, s := range []struct {
		p      *plot.Plot
		name   string
		y      []float64
		i      int
		dashed bool
	}{{loss, "training", c.TrainLoss, 0, false}, {loss, "validation", c.ValLoss, 1, true},
		{acc, "training", c.TrainAcc, 0, false}, {acc, "validation", c.ValAcc, 1, true}} {
		if err := line(s.p, s.name, s.y, s.i, s.dashed); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
	}
	loss.Legend.Top, acc.Legend.Top, acc.Legend.Left = true, false, false
	return savePNG(path, 5*vg.Inch, 4*vg.Inch, loss, acc)
}

// countGrid is a confusion matrix as a plotter grid: x the pick, y the
// true label.
type countGrid [][]int

func (g countGrid) Dims() (c, r int)   { return len(g), len(g) }
func (g countGrid) X(c int) float64    { return float64(c) }
func (g countGrid) Y(r int) float64    { return float64(r) }
func (g countGrid) Z(c, r int) float64 { return float64(g[r][c]) }

func writeConfusion(path string, rows []LabelRow, p Picks, op hetero.Op, class string) error {
	// The formats the class's rows timed or the predictor picked: a
	// format the device cannot run would only add an empty row and column.
	used := map[string]bool{}
	for i, r := range rows {
		if r.Op == op.String() && r.DeviceClass == class {
			for f := range r.Times {
				used[f] = true
			}
			used[p.Formats[i]] = true
		}
	}
	var names []string
	for _, f := range op.Formats() {
		if used[f] {
			names = append(names, f)
		}
	}
	m := Confusion(rows, p, op.String(), class, names)
	total, right, most := 0, 0, 1
	for r := range m {
		for c, n := range m[r] {
			total += n
			most = max(most, n)
			if r == c {
				right += n
			}
		}
	}
	var labels plotter.XYLabels
	var dark []bool
	for r := range m {
		for c, n := range m[r] {
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(c), Y: float64(r)})
			labels.Labels = append(labels.Labels, fmt.Sprint(n))
			dark = append(dark, 2*n > most)
		}
	}
	pl := plot.New()
	who := p.Predictor + "'s picks"
	if p.Predictor == PredictorDefault {
		who = "the model's picks"
	}
	// Two lines: a head's name (opencl-cpu/skylake-avx512) and the count
	// on one would run past the plot's width.
	pl.Title.Text = fmt.Sprintf("%s on %s\n%s: %d of %d right", op, class, who, right, total)
	pl.X.Label.Text, pl.Y.Label.Text = "picked", "fastest"
	pal, err := brewer.GetPalette(brewer.TypeSequential, "Blues", 9)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	h := plotter.NewHeatMap(countGrid(m), pal)
	h.Min, h.Max = 0.5, float64(most)
	h.Underflow = color.White
	pl.Add(h)
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
		if dark[i] { // white on the palette's darker half
			l.TextStyle[i].Color = color.White
		}
	}
	pl.Add(l)
	pl.NominalX(names...)
	pl.NominalY(names...)
	return savePNG(path, 5*vg.Inch, 4.5*vg.Inch, pl)
}

func writeRatioByBucket(path string, rep *Report) error {
	pl := plot.New()
	pl.Title.Text = "oracle ratio (geometric mean of t(best)/t(picked)) by nonzeros, all heads"
	pl.Y.Label.Text, pl.X.Label.Text = "oracle ratio", "nonzeros"
	pl.Y.Tick.Marker = distinctTicks{}
	var shown []Picks
	var ratios [][]float64
	lowest := 1.0
	for _, p := range rep.Picks {
		if !strings.HasPrefix(p.Predictor, fixedPrefix) {
			ratio, _ := RatioByBucket(rep.Rows, p)
			shown, ratios = append(shown, p), append(ratios, ratio)
			for _, r := range ratio {
				if r > 0 { // an empty bucket's ratio is 0: no bar
					lowest = min(lowest, r)
				}
			}
		}
	}
	// The axis starts below the lowest bar, not at 0: ratios of 0.97
	// and 0.99 differ by what a user feels, and on an axis from 0 they
	// look the same. Headroom above 1 keeps the legend off the bars.
	yMin := ratioAxisMin(lowest)
	w := vg.Points(60 / float64(max(len(shown), 1)))
	for i, p := range shown {
		ratio := ratios[i]
		b, err := plotter.NewBarChart(plotter.Values(ratio), w)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(shown)-1)/2)
		pl.Add(b)
		pl.Legend.Add(p.Predictor, b)
	}
	counts := make([]int, len(NNZBuckets))
	for _, r := range rep.Rows {
		counts[nnzBucket(r.NNZ)]++
	}
	names := make([]string, len(NNZBuckets))
	for i, b := range NNZBuckets {
		names[i] = fmt.Sprintf("%s (%d rows)", b.Name, counts[i])
	}
	pl.NominalX(names...)
	// Set after the bars, whose data range reaches down to 0.
	pl.Y.Min, pl.Y.Max = yMin, 1+0.5*(1-yMin)
	pl.Legend.Top, pl.Legend.Left = true, true
	return savePNG(path, 8*vg.Inch, 4.5*vg.Inch, pl)
}

// ratioAxisMin returns where the oracle ratio's axis starts for bars
// whose lowest is lowest: a step of 0.05 below it, so that every bar
// shows, and 0 for a ratio under 0.5, where the bars' lengths are what
// tells them apart.
func ratioAxisMin(lowest float64) float64 {
	if !(lowest >= 0.5) {
		return 0
	}
	return math.Floor(lowest*20)/20 - 0.05
}

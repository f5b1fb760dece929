package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
	"github.com/sparsetune/sparsetune/model"
	"github.com/sparsetune/sparsetune/train"
)

func init() { register(newTrainCmd); register(newEvalCmd) }

func newTrainCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "train --labels FILE --out MODEL.onnx [--folds 5] [--epochs 60] [--seed 1] [--plots DIR]",
		Short: "Train the SPT-GCN on a labels file, cross-validated, and write the model",
		Long: `Train the SPT-GCN format predictor on the rows of a labels file written by
sparsetune label, with one head per op and device class.

First, --folds-fold cross-validation grouped by source matrix (tensors
derived from one matrix never sit on both sides of a split) scores the GCN,
the baselines (golearn's tree, our kNN) trained on the same folds, the hand
rule, each fixed format and measure-all per op and device class: accuracy,
tie-aware accuracy (the pick within 3% of the fastest) and the oracle ratio
(geometric mean of t(best)/t(picked)). Then the final model is trained on
every row and written to --out (one ONNX file per op: with rows of several
ops, MODEL.onnx becomes MODEL.ttm.onnx and MODEL.mttkrp.onnx). A head for
which the hand rule scored level with or above the GCN (oracle ratio and
accuracy no lower) is marked in the file: predictions for it are the
rule's.

Rows whose every format was skipped are left out and counted; a labels
file that mixes builds is warned about. --folds 1 skips cross-validation.
docs/train.md defines the report.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrain(cmd, v)
		},
	}
	f := cmd.Flags()
	f.String("labels", "", "labels file (JSON lines; gzip-compressed when it ends in .gz) written by sparsetune label")
	f.String("out", "", "model file to write (ONNX); one per op, named MODEL.OP.onnx, when the labels hold several ops")
	f.Int("folds", train.DefaultFolds, "k of the grouped k-fold cross-validation (1: none)")
	f.Int("epochs", model.DefaultFitOptions.Epochs, "most passes over the training rows")
	f.Int("patience", model.DefaultFitOptions.Patience, "epochs without a better validation loss before stopping")
	f.Uint64("seed", 1, "seed of the folds, the initial weights and the shuffling")
	f.String("plots", "", "directory for PNG plots: training curves, confusion matrices, oracle ratio by nonzeros")
	f.Float64("soft", train.DefaultSoft, "temperature of the soft targets the GCN trains on (a format t/t_best slower weighs exp(-ln(t/t_best)/soft)); 0 trains on the fastest format alone")
	f.Float64("average", train.DefaultAverage, "decay per step of the moving average of the weights that each epoch evaluates and training keeps (0: the last step's weights)")
	f.Int("hidden", model.DefaultConfig("").Hidden, "width of the network's graph layers (inference costs about its square)")
	f.Bool("refit", false, "once early stopping has chosen the epochs, train each network again on every row, its validation part too, for that many epochs")
	for _, name := range []string{"labels", "out", "folds", "epochs", "patience", "seed", "plots", "soft", "average", "hidden", "refit"} {
		_ = v.BindPFlag("train."+name, f.Lookup(name))
	}
	return cmd
}

func newEvalCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval --labels FILE --model MODEL.onnx[,MODEL2.onnx] [--by-nnz] [--json]",
		Short: "Score a trained model, the baselines, the rule and fixed formats on a labels file",
		Long: `Score the predictors on the rows of a labels file, per op and device class:
the GCN of --model (one file per op, comma-separated or repeated; a row
whose op or device class has no head gets no gcn score, with a warning),
the baselines (golearn's tree, our kNN) cross-validated on the labels
themselves (grouped by source, --folds; they have no model file), the hand
rule, each fixed format and measure-all with its cost. --json prints an
array of objects with op, device_class, predictor, n, accuracy,
tie_accuracy and oracle_ratio (measure_cost for measure-all). docs/train.md defines them.
--by-nnz adds the same scores for each nonzero range of the paper's Table
4 (0-100, 100-1K, 1K-10K, 10K-100K, >100K): a second table, or in JSON
more objects, each with nnz_bucket.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEval(cmd, v)
		},
	}
	f := cmd.Flags()
	f.String("labels", "", "labels file (JSON lines; gzip-compressed when it ends in .gz) written by sparsetune label")
	f.StringSlice("model", nil, "model files (ONNX) written by sparsetune train, one per op")
	f.Int("folds", train.DefaultFolds, "k of the grouped cross-validation of the baselines (1: no baselines)")
	f.Uint64("seed", 1, "seed of the baselines' folds")
	f.String("plots", "", "directory for PNG plots: confusion matrices, oracle ratio by nonzeros")
	f.Bool("by-nnz", false, "also score each nonzero range (0-100, 100-1K, 1K-10K, 10K-100K, >100K)")
	for _, name := range []string{"labels", "model", "folds", "seed", "plots", "by-nnz"} {
		_ = v.BindPFlag("eval."+name, f.Lookup(name))
	}
	return cmd
}

// readLabelsFor reads a labels file and returns its rows with the options
// every report shares.
func readLabelsFor(path string, stderr io.Writer) ([]train.LabelRow, train.FitOptions, *fitProgress, error) {
	rows, err := train.ReadLabels(path)
	if err != nil {
		return nil, train.FitOptions{}, nil, err
	}
	prog := newFitProgress(stderr)
	o := train.FitOptions{Dir: filepath.Dir(path), Warn: prog.warn, Progress: prog.update}
	return rows, o, prog, nil
}

// modelPaths names the model file of each op: out itself for one op,
// else out with the op before its extension.
func modelPaths(out string, ops []string) map[string]string {
	paths := map[string]string{}
	if len(ops) == 1 {
		paths[ops[0]] = out
		return paths
	}
	ext := filepath.Ext(out)
	for _, op := range ops {
		paths[op] = strings.TrimSuffix(out, ext) + "." + op + ext
	}
	return paths
}

func runTrain(cmd *cobra.Command, v *viper.Viper) error {
	start := time.Now()
	labels, out := v.GetString("train.labels"), v.GetString("train.out")
	if labels == "" || out == "" {
		return errors.New("train needs --labels FILE (from sparsetune label) and --out MODEL.onnx")
	}
	if v.GetInt("train.folds") < 1 || v.GetInt("train.epochs") < 1 || v.GetInt("train.patience") < 1 || v.GetInt("train.hidden") < 1 {
		return fmt.Errorf("--folds, --epochs, --patience and --hidden must be at least 1, found %d, %d, %d and %d", v.GetInt("train.folds"), v.GetInt("train.epochs"), v.GetInt("train.patience"), v.GetInt("train.hidden"))
	}
	if !strings.EqualFold(filepath.Ext(out), ".onnx") {
		// Also what keeps the model from replacing the labels it was
		// trained on (train --labels y.jsonl --out y.jsonl did).
		return fmt.Errorf("--out %s: expected a model file name ending in .onnx", out)
	}
	if err := checkOutPath("--out", out); err != nil {
		return err
	}
	if err := makePlotsDir(v.GetString("train.plots")); err != nil {
		return err
	}
	if soft := v.GetFloat64("train.soft"); !(soft >= 0) || math.IsInf(soft, 0) {
		return fmt.Errorf("--soft must be 0 or more, and finite, found %g", soft)
	}
	if a := v.GetFloat64("train.average"); !(a >= 0 && a < 1) {
		return fmt.Errorf("--average must be in [0, 1), found %g", a)
	}
	rows, o, prog, err := readLabelsFor(labels, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	o.Folds, o.Seed = v.GetInt("train.folds"), v.GetUint64("train.seed")
	o.Soft = v.GetFloat64("train.soft")
	o.Hidden = v.GetInt("train.hidden")
	o.Refit = v.GetBool("train.refit")
	o.Model = model.DefaultFitOptions
	o.Model.Epochs, o.Model.Patience = v.GetInt("train.epochs"), v.GetInt("train.patience")
	o.Model.Average = v.GetFloat64("train.average")
	rep, err := train.Fit(rows, o)
	prog.finish()
	if err != nil {
		return fmt.Errorf("%s: %w", labels, err)
	}
	var ops []string
	for op := range rep.Models {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	paths := modelPaths(out, ops)
	var written []string
	for _, op := range ops {
		data, err := rep.Models[op].ExportONNX()
		if err != nil {
			return fmt.Errorf("%s: %w", paths[op], err)
		}
		if err := atomicfile.WriteBytes(paths[op], data); err != nil {
			return fmt.Errorf("%s: %w", paths[op], err)
		}
		written = append(written, paths[op])
	}
	var plots []string
	if dir := v.GetString("train.plots"); dir != "" {
		if plots, err = train.WritePlots(dir, rep); err != nil {
			return err
		}
	}
	if v.GetBool("json") {
		return writeScoresJSON(cmd.OutOrStdout(), rep.Scores)
	}
	w := cmd.OutOrStdout()
	if rep.Folds > 1 {
		fmt.Fprintf(w, "%d-fold cross-validation grouped by source: %d rows, %d tensors, %d sources\n", rep.Folds, len(rep.Rows), rep.Tensors, rep.Sources)
	} else {
		fmt.Fprintf(w, "no cross-validation (--folds 1): %d rows, %d tensors, %d sources\n", len(rep.Rows), rep.Tensors, rep.Sources)
	}
	if err := writeScoresTable(w, rep.Scores); err != nil {
		return err
	}
	for _, c := range rep.Curves {
		fmt.Fprintf(w, "%s model: %d training and %d validation examples, best epoch %d of %d\n", c.Op, c.TrainExamples, c.ValExamples, c.BestEpoch, len(c.TrainLoss))
		if c.RefitExamples > 0 {
			fmt.Fprintf(w, "%s model: refit on all %d examples for %d epochs, kept epoch %d\n", c.Op, c.RefitExamples, c.BestEpoch, c.RefitEpoch)
		}
	}
	for _, op := range slices.Sorted(maps.Keys(rep.RuleHeads)) {
		fmt.Fprintf(w, "%s model: the gcn's oracle ratio does not lead the hand rule's by %g for %s: those heads answer with the rule\n", op, train.RuleMargin, strings.Join(rep.RuleHeads[op], ", "))
	}
	for _, op := range slices.Sorted(maps.Keys(rep.TreeHeads)) {
		fmt.Fprintf(w, "%s model: the boosted trees, alone or blended with the gcn, score level with or above the gcn for %s: those heads answer with the trees\n", op, strings.Join(rep.TreeHeads[op], ", "))
		for _, class := range rep.TreeHeads[op] {
			if m, ok := rep.BlendMargins[op][class]; ok {
				fmt.Fprintf(w, "%s model: %s: where the trees' first class leads the next by less than %g, the network is asked too and the answer is their mean (blend)\n", op, class, m)
			}
		}
	}
	fmt.Fprintf(w, "wrote %s (%.1fs)\n", strings.Join(written, ", "), time.Since(start).Seconds())
	if len(plots) > 0 {
		fmt.Fprintf(w, "plots: %s\n", strings.Join(plots, ", "))
	}
	return nil
}

func runEval(cmd *cobra.Command, v *viper.Viper) error {
	labels, files := v.GetString("eval.labels"), v.GetStringSlice("eval.model")
	if labels == "" {
		return errors.New("eval needs --labels FILE (from sparsetune label)")
	}
	if v.GetInt("eval.folds") < 1 {
		return fmt.Errorf("--folds must be at least 1, found %d", v.GetInt("eval.folds"))
	}
	var models []*model.ONNXModel
	for _, f := range files {
		m, err := model.LoadONNX(f)
		if err != nil {
			return err
		}
		models = append(models, m)
	}
	if err := makePlotsDir(v.GetString("eval.plots")); err != nil {
		return err
	}
	rows, o, prog, err := readLabelsFor(labels, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	for _, m := range models {
		// A model asked for by name that scores nothing is a mistake,
		// not a table without it.
		if !slices.ContainsFunc(rows, func(r train.LabelRow) bool { return r.Op == m.Info.Op }) {
			prog.finish()
			return fmt.Errorf("--model %s predicts for %s, and %s holds no %s rows", m.Info.Path, m.Info.Op, labels, m.Info.Op)
		}
	}
	if len(files) == 0 {
		// The default models of the ops the labels hold.
		for _, op := range hetero.Ops {
			if !slices.ContainsFunc(rows, func(r train.LabelRow) bool { return r.Op == op.String() }) {
				continue
			}
			m, err := model.DefaultModel(op)
			if errors.Is(err, model.ErrNoDefault) {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %v: its rows are scored without a GCN\n", err)
				continue
			}
			if err != nil {
				return err
			}
			models = append(models, m)
		}
	}
	o.Folds, o.Seed = v.GetInt("eval.folds"), v.GetUint64("eval.seed")
	rep, err := train.Evaluate(rows, models, o)
	prog.finish()
	if err != nil {
		return fmt.Errorf("%s: %w", labels, err)
	}
	var plots []string
	if dir := v.GetString("eval.plots"); dir != "" {
		if plots, err = train.WritePlots(dir, rep); err != nil {
			return err
		}
	}
	var byNNZ []train.Score
	if v.GetBool("eval.by-nnz") {
		byNNZ = train.ScoresByNNZ(rep.Rows, rep.Picks)
	}
	if v.GetBool("json") {
		return writeScoresJSON(cmd.OutOrStdout(), append(rep.Scores, byNNZ...))
	}
	w := cmd.OutOrStdout()
	from := files
	if len(from) == 0 {
		// The default models: say which (embedded, or the user's own).
		for _, m := range models {
			from = append(from, m.Info.Path)
		}
	}
	fmt.Fprintf(w, "%s: %d rows, %d tensors, %d sources; gcn from %s\n", labels, len(rep.Rows), rep.Tensors, rep.Sources, strings.Join(from, ", "))
	if err := writeScoresTable(w, rep.Scores); err != nil {
		return err
	}
	if len(byNNZ) > 0 {
		fmt.Fprintf(w, "\nby nonzeros:\n")
		if err := writeScoresTable(w, byNNZ); err != nil {
			return err
		}
	}
	if len(plots) > 0 {
		fmt.Fprintf(w, "plots: %s\n", strings.Join(plots, ", "))
	}
	return nil
}

// writeScoresJSON prints the scores as a JSON array.
func writeScoresJSON(w io.Writer, s []train.Score) error {
	if s == nil {
		s = []train.Score{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// writeScoresTable prints the scores, a blank line between heads, with a
// nonzeros column when they are scores of nonzero ranges.
func writeScoresTable(w io.Writer, scores []train.Score) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	byNNZ := len(scores) > 0 && scores[0].NNZBucket != ""
	bucket := func(s train.Score) string {
		if byNNZ {
			return s.NNZBucket + "\t"
		}
		return ""
	}
	head := "op\tdevice class\t"
	if byNNZ {
		head += "nonzeros\t"
	}
	fmt.Fprintf(tw, "%spredictor\tn\taccuracy\ttie accuracy\toracle ratio\tmeasure cost\t\n", head)
	for i, s := range scores {
		if i > 0 && (s.Op != scores[i-1].Op || s.DeviceClass != scores[i-1].DeviceClass || s.NNZBucket != scores[i-1].NNZBucket) {
			fmt.Fprintf(tw, "%s\n", strings.Repeat("\t", strings.Count(head, "\t")+6))
		}
		cost := ""
		if s.MeasureCost > 0 {
			cost = fmt.Sprintf("%.1fx", s.MeasureCost)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%d\t%.3f\t%.3f\t%.3f\t%s\t\n", s.Op, s.DeviceClass, bucket(s), s.Predictor, s.N, s.Accuracy, s.TieAccuracy, s.OracleRatio, cost)
	}
	return tw.Flush()
}

// fitProgress shows training's progress on stderr: a status line
// rewritten in place on a terminal, a line per stage elsewhere.
type fitProgress struct {
	w     io.Writer
	tty   bool
	last  string // the stage line printed last (not on a terminal)
	shown bool   // a status line is on the terminal
}

func newFitProgress(w io.Writer) *fitProgress { return &fitProgress{w: w, tty: isTerminal(w)} }

func (p *fitProgress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

func (p *fitProgress) warn(msg string) {
	p.clear()
	fmt.Fprintf(p.w, "warning: %s\n", msg)
}

func (p *fitProgress) update(e train.FitProgress) {
	var stage, status string
	switch e.Stage {
	case "features":
		stage = "reading tensors and computing features"
		status = fmt.Sprintf("features: %d/%d tensors %s", e.Done, e.Total, e.Tensor)
	case "fold":
		stage = fmt.Sprintf("fold %d/%d: training the %s GCN", e.Fold, e.Folds, e.Op)
		status = fmt.Sprintf("%s, epoch %d/%d, loss %.4f, validation %.4f", stage, e.Epoch, e.Epochs, e.TrainLoss, e.ValLoss)
	case "final":
		stage = fmt.Sprintf("final model: training the %s GCN on every row", e.Op)
		status = fmt.Sprintf("%s, epoch %d/%d, loss %.4f, validation %.4f", stage, e.Epoch, e.Epochs, e.TrainLoss, e.ValLoss)
	case "trees":
		stage = "boosting the trees of every head, fold by fold"
		status = fmt.Sprintf("%s: fold %d/%d", stage, e.Done+1, e.Total)
	case "fold refit":
		stage = fmt.Sprintf("fold %d/%d: refitting the %s GCN on the validation rows too", e.Fold, e.Folds, e.Op)
		status = fmt.Sprintf("%s, epoch %d/%d, loss %.4f", stage, e.Epoch, e.Epochs, e.TrainLoss)
	case "final refit":
		stage = fmt.Sprintf("final model: refitting the %s GCN on the validation rows too", e.Op)
		status = fmt.Sprintf("%s, epoch %d/%d, loss %.4f", stage, e.Epoch, e.Epochs, e.TrainLoss)
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", status)
		p.shown = true
		return
	}
	if stage != p.last {
		fmt.Fprintln(p.w, stage)
		p.last = stage
	}
}

// finish removes the status line.
func (p *fitProgress) finish() { p.clear() }

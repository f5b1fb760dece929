package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
	"github.com/sparsetune/sparsetune/model"
	"github.com/sparsetune/sparsetune/train"
)

func init() { register(newTuneModelCmd) }

func newTuneModelCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tune-model --from DIR [--devices cpu,cuda:0] [--budget 20m] [--count 300] [--max-nnz 2000000] [--rank 16] [--seed 1] [--work DIR] [--force]",
		Short: "Adapt the default model to this machine: label a small generated set here, fine-tune, install",
		Long: `Labels belong to hardware: the default model was trained on labels
measured elsewhere. tune-model generates a small set of tensors from the
MatrixMarket matrices in --from (as sparsetune gen does), labels it on
this machine's --devices (as sparsetune label does), fine-tunes the
model in effect from those labels (its layers and the heads of the same
device classes are the starting point), and installs the result as this
user's default model (model.OP.onnx in the sparsetune config directory;
--model and config still win).

A quarter of the source matrices are held out (grouped by source, as in
train): the eval table on them is printed for the model before and after.
Which are held out is kept in --work (holdout.json): a later run keeps
them, so the model a run installed is never scored on rows it was tuned
on.
The tuned model is installed only if its oracle ratio on the held-out rows
is not below the old one's (by more than 0.002), on at least 50 of them;
where the model in effect already learnt this machine's own times (its
head records this processor), only if it is above it by more than 0.002
(--force installs it anyway). A head whose network's picks were not
faster than the hand rule's on them defers to the rule, as in train.

--rank times the kernels at the rank you decompose at. The default model
learnt rank-16 times; on the machine measured, its MTTKRP picks hold
from rank 4 to 16 and not at 32 or 64, where CSF takes over
(docs/model.md, "The default model at other ranks"). Each rank has its
own labels file in --work, and a tuning learns every rank tuned there so
far, one head per rank (docs/train.md): tune at each rank you decompose
at, and a decision asks the head nearest its rank.

The whole run aims at --budget: labelling stops at 70% of it and the rows
measured so far are used. The set and the labels live in --work (default
the user cache directory), so a second run resumes and adds to them; the
default set (300 tensors of up to 2 M nonzeros) takes about 1.2 GB there,
and on 2 cores about 3 minutes to label and tune. The tuned model has
heads only for the device classes labelled here: list every device you
use in --devices.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runTuneModel(cmd, v) },
	}
	f := cmd.Flags()
	f.String("from", "", "directory of MatrixMarket matrices (*.mtx, *.mtx.gz) to generate the tensors from")
	f.String("devices", "cpu", "comma-separated devices to label on: cpu, opencl:0, cuda:0")
	f.Duration("budget", 20*time.Minute, "time the whole run aims at")
	f.Int("count", 300, "tensors to generate")
	f.Int("max-nnz", 2_000_000, "largest target number of nonzeros")
	f.Uint64("seed", 1, "seed of the generated set and of training")
	f.String("work", "", "directory for the set and the labels (default: the user cache directory's sparsetune/tune)")
	f.Bool("force", false, "install the tuned model even if it scores below the old one")
	f.Int("rank", train.DefaultLabelRank, "rank R the kernels are timed at: the rank you decompose at (the default model learnt rank-16 times)")
	for _, name := range []string{"from", "devices", "budget", "count", "max-nnz", "seed", "work", "force", "rank"} {
		v.BindPFlag("tune-model."+name, f.Lookup(name))
	}
	return cmd
}

// tuneMinHeldOut is the fewest held-out rows of an op on which a tuned
// model may replace the one in effect: on a handful (a budget of seconds
// labels a few tensors) one pick moves the oracle ratio by several
// hundredths either way, and a lucky draw would replace a model trained
// on thousands of rows.
const tuneMinHeldOut = 50

// tuneInstallSlack is how far below the old model's held-out oracle ratio
// a tuned model may land and still be installed: the difference of one
// pick in a few hundred rows is noise, not a worse model. Where the
// model in effect already learnt this machine (model.Info.LearntOn), the
// slack counts the other way: the tuned model must score above it by
// more than that (tuneVerdict).
const tuneInstallSlack = 0.002

// tuneVerdict says why a tuned model of held-out oracle ratio tuned does
// not replace the one in effect, of ratio old over the same rows, or ""
// when it does. learnt says the model in effect learnt from this
// machine's own times: its head trained on thousands of rows of it, and
// a tuning's few hundred held-out rows cannot tell a tuned model that
// looks level from a worse one. Measured on the 2-core Intel VM whose
// times the default MTTKRP model's Intel head learnt (docs/train.md): a
// tuned model scored 0.985 against 0.986 on its 228 held-out rows, and
// 0.769 / 0.973 against 0.791 / 0.977 (accuracy / oracle ratio) on the
// 1,040 held-out rows of model/heldout measured there.
func tuneVerdict(old, tuned float64, rows int, learnt bool) string {
	switch {
	case rows < tuneMinHeldOut:
		return fmt.Sprintf("%d held-out rows are too few to tell the tuned model from it (at least %d: a longer --budget labels more, and a later run adds to these; --force installs it anyway)", rows, tuneMinHeldOut)
	case learnt && tuned <= old+tuneInstallSlack:
		return fmt.Sprintf("it learnt from this machine's own times, and the tuned one's held-out oracle ratio is %.3f against its %.3f, not above it by more than %g (--force installs it anyway)", tuned, old, tuneInstallSlack)
	case !learnt && tuned < old-tuneInstallSlack:
		return fmt.Sprintf("the tuned one's held-out oracle ratio is %.3f against %.3f (--force installs it anyway)", tuned, old)
	}
	return ""
}

// tuneLabels returns the labels file of a tuning at rank in work: one
// file per rank, each resumed by the tunings at its rank, and the rank-16
// file keeps the name it always had.
func tuneLabels(work string, rank int) string {
	if rank == train.DefaultLabelRank {
		return filepath.Join(work, "labels.jsonl")
	}
	return filepath.Join(work, fmt.Sprintf("labels-r%d.jsonl", rank))
}

// tuneRows reads the labels of every rank tuned in work so far (the
// files tuneLabels names, rank 16's first): a tuning learns them all,
// one head per rank (train's rank heads), so that tuning at a second
// rank does not forget the first. The directory is listed rather than
// globbed, so that a work path holding a glob's metacharacters still
// finds its files.
func tuneRows(work string) ([]train.LabelRow, error) {
	entries, err := os.ReadDir(work)
	if err != nil {
		return nil, err
	}
	at16 := filepath.Base(tuneLabels(work, train.DefaultLabelRank))
	var files []string
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(work, e.Name())
		rank, _ := strings.CutSuffix(strings.TrimPrefix(name, "labels-r"), ".jsonl")
		switch r, err := strconv.Atoi(rank); {
		case name == at16:
			files = append([]string{path}, files...)
		case err == nil && name == filepath.Base(tuneLabels(work, r)):
			files = append(files, path)
		}
	}
	var rows []train.LabelRow
	for _, f := range files {
		r, err := train.ReadLabels(f)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

func runTuneModel(cmd *cobra.Command, v *viper.Viper) error {
	start := time.Now()
	from, budget, count, seed := v.GetString("tune-model.from"), v.GetDuration("tune-model.budget"), v.GetInt("tune-model.count"), v.GetUint64("tune-model.seed")
	rank := v.GetInt("tune-model.rank")
	switch {
	case from == "":
		return errors.New("tune-model needs --from DIR: MatrixMarket matrices to generate tensors from (e.g. SuiteSparse's)")
	case budget <= 0:
		return fmt.Errorf("--budget: expected a positive duration, found %s", budget)
	case count < 8:
		return fmt.Errorf("--count: expected at least 8 tensors (a quarter of the sources is held out), found %d", count)
	case rank < 1:
		return fmt.Errorf("--rank: expected at least 1, found %d", rank)
	}
	work := v.GetString("tune-model.work")
	if work == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("--work not given and no user cache directory: %w", err)
		}
		work = filepath.Join(dir, "sparsetune", "tune")
	}
	var devices []hetero.Device
	for _, name := range strings.Split(v.GetString("tune-model.devices"), ",") {
		d, err := hetero.Lookup(strings.TrimSpace(name), v.GetInt("threads"))
		if err != nil {
			return fmt.Errorf("--devices: %w", err)
		}
		devices = append(devices, d)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	step := func(format string, a ...any) {
		fmt.Fprintf(stderr, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}

	// 1. Generate (resumable: present tensors are kept).
	set, labels := filepath.Join(work, "set"), tuneLabels(work, rank)
	mats, err := train.ScanMatrices(from)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	specs, err := train.Plan(mats, train.PlanOptions{Count: count, Seed: seed, MaxNNZ: v.GetInt("tune-model.max-nnz")})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	// Generating stops at 30% of the budget, as labelling does at 70%:
	// a short budget labels the tensors made by then (a later run adds
	// the rest), where a whole set took 23 s on 2 cores before a 1 s
	// budget's labelling could start.
	genCtx, cancelGen := context.WithDeadline(ctx, start.Add(budget*3/10))
	defer cancelGen()
	step("generating %d tensors from %s into %s (until %s into the run)", len(specs), from, set, (budget * 3 / 10).Round(time.Second))
	gen, err := train.WriteSet(genCtx, specs, train.WriteOptions{From: from, Out: set,
		Warn: func(w string) { fmt.Fprintln(stderr, "warning:", w) }})
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("interrupted while generating: run the same command again to resume")
	case errors.Is(err, context.DeadlineExceeded):
		made := 0
		if gen != nil {
			made = gen.Written + gen.Skipped
		}
		step("generating stopped at the budget's 30%%: %d of %d tensors; a later run adds the rest", made, len(specs))
		if made == 0 {
			return fmt.Errorf("--budget %s: no tensor was generated by 30%% of it; give a larger --budget (the set is kept in %s, and a later run goes on with it)", budget, set)
		}
	case err != nil:
		return err
	}

	// 2. Label until 70% of the budget; what is measured by then is used.
	labelCtx, cancel := context.WithDeadline(ctx, start.Add(budget*7/10))
	defer cancel()
	step("labelling on %s at rank %d (until %s into the run)", v.GetString("tune-model.devices"), rank, (budget * 7 / 10).Round(time.Second))
	lp := newLabelProgress(stderr, time.Now())
	sum, err := train.Label(labelCtx, set, labels, train.LabelOptions{Devices: devices, Rank: rank, Progress: lp.update, Warn: lp.warn})
	lp.finish(err == nil)
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("interrupted while labelling: run the same command again to resume")
	case errors.Is(err, context.DeadlineExceeded):
		written := 0
		if sum != nil {
			written = sum.Written
		}
		step("labelling stopped at the budget's 70%%: %d rows this run; a later run resumes", written)
	case err != nil:
		return err
	}

	// 3. Hold out a quarter of the sources, of every rank's rows.
	rows, err := tuneRows(work)
	if err != nil {
		return err
	}
	rows = slices.DeleteFunc(rows, func(r train.LabelRow) bool {
		return !slices.ContainsFunc(devices, func(d hetero.Device) bool { return d.Info().Class() == r.DeviceClass })
	})
	heldOut, err := holdOut(filepath.Join(work, "holdout.json"), rows, seed)
	if err != nil {
		return err
	}
	var ranks []int
	for _, r := range rows {
		if !slices.Contains(ranks, r.Rank) {
			ranks = append(ranks, r.Rank)
		}
	}
	slices.Sort(ranks)
	if len(ranks) > 1 {
		step("the rows of ranks %v, tuned in %s so far, train one head per rank", ranks, work)
	}
	var tune, held []train.LabelRow
	for _, r := range rows {
		if heldOut[r.Source] {
			held = append(held, r)
		} else {
			tune = append(tune, r)
		}
	}

	// 4. The models in effect, scored on the held-out rows.
	var before []*model.ONNXModel
	initial := map[string]*model.GCN{}
	stale := map[string]bool{}  // ops whose user model this build cannot feed
	learnt := map[string]bool{} // ops whose model in effect learnt these devices
	for _, op := range hetero.Ops {
		if !slices.ContainsFunc(rows, func(r train.LabelRow) bool { return r.Op == op.String() }) {
			continue
		}
		m, err := model.DefaultModel(op)
		if revErr := (*model.FeatureRevisionError)(nil); errors.As(err, &revErr) {
			// The user's model was trained on features this build no
			// longer computes: tune from the embedded one, and replace it.
			fmt.Fprintf(stderr, "note: %v; tuning from the embedded %s model instead\n", err, op)
			stale[op.String()] = true
			m, err = model.EmbeddedModel(op)
		}
		if err != nil {
			return err
		}
		g, err := m.GCN()
		if err != nil {
			return err
		}
		before, initial[op.String()] = append(before, m), g
		// A model whose head for every device labelled here learnt from
		// that device's own times, at every rank tuned, is replaced only
		// by a better one (tuneVerdict); at another rank it learnt other
		// answers, as far as the labels go.
		learnt[op.String()] = !slices.ContainsFunc(devices, func(d hetero.Device) bool {
			return !m.Info.LearntOn(d.Info()) || slices.ContainsFunc(ranks, func(r int) bool { return !m.Info.LearntAtRank(d.Info(), r) })
		})
		if learnt[op.String()] {
			fmt.Fprintf(stderr, "note: the %s model in effect learnt from this machine's own times (%s): a tuned model replaces it only where it scores better on the held-out rows\n", op, m.Info.Path)
		}
	}
	if len(before) == 0 {
		return errors.New("no labelled rows for any op: nothing to tune")
	}
	prog := newFitProgress(stderr)
	// Fine-tuning takes few steps from the default's weights: it keeps
	// the iterates (Average 0), as it was measured (docs/model.md), not a
	// moving average that would lag behind them.
	o := train.FitOptions{Dir: work, Folds: 1, Seed: seed, Warn: prog.warn, Progress: prog.update, Budget: before[0].Info.Budget, Init: initial, Model: model.DefaultFitOptions, Soft: train.DefaultSoft, Hidden: before[0].Info.Hidden, AllTrees: true}
	step("scoring the model in effect on %d held-out rows", len(held))
	old, err := train.Evaluate(held, before, o)
	if err != nil {
		return err
	}

	// 5. Fine-tune on the rest, then score the same way; heads whose rule
	// beat the network on the held-out rows defer to it.
	step("fine-tuning on %d rows", len(tune))
	rep, err := train.Fit(tune, o)
	prog.finish()
	if err != nil {
		return err
	}
	exportAll := func() (map[string][]byte, []*model.ONNXModel, error) {
		files, models := map[string][]byte{}, []*model.ONNXModel(nil)
		for op, g := range rep.Models {
			data, err := g.ExportONNX()
			if err != nil {
				return nil, nil, err
			}
			m, err := model.ParseONNX("tuned "+op, data)
			if err != nil {
				return nil, nil, err
			}
			files[op], models = data, append(models, m)
		}
		return files, models, nil
	}
	_, tuned, err := exportAll()
	if err != nil {
		return err
	}
	evalNew, err := train.Evaluate(held, tuned, o)
	if err != nil {
		return err
	}
	// Trees were fitted on the tuning rows for every head (AllTrees): a
	// head keeps them where they, alone or blended with the tuned network
	// under some margin, score level with or above it on the held-out
	// rows, as train decides on its folds.
	ruleHeads := train.RuleHeads(evalNew.Scores)
	treeHeads, margins := evalNew.ChooseTrees(ruleHeads)
	for op, g := range rep.Models {
		g.RuleHeads = ruleHeads[op]
		maps.DeleteFunc(g.Trees, func(head string, _ *model.Trees) bool { return !slices.Contains(treeHeads[op], head) })
		g.BlendMargins = margins[op]
	}
	files, tuned, err := exportAll()
	if err != nil {
		return err
	}
	if evalNew, err = train.Evaluate(held, tuned, o); err != nil {
		return err
	}

	// 6. Report, and install where the tuned model is not worse.
	fmt.Fprintf(w, "tune-model: %d tensors, %d rows labelled on %s (%d tuned on, %d held out from %d sources)\n",
		len(specs), len(rows), v.GetString("tune-model.devices"), len(tune), len(held), countSources(held))
	fmt.Fprintln(w, "\nbefore (the model in effect), on the held-out rows:")
	if err := writeScoresTable(w, inEffect(old.Scores)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nafter (fine-tuned here), on the same rows:")
	if err := writeScoresTable(w, inEffect(evalNew.Scores)); err != nil {
		return err
	}
	fmt.Fprintln(w)
	force := v.GetBool("tune-model.force")
	for _, op := range slices.Sorted(maps.Keys(files)) {
		a, rows := oracleOf(old.Scores, op)
		b, _ := oracleOf(evalNew.Scores, op)
		hop, err := hetero.ParseOp(op)
		if err != nil {
			return err
		}
		path, err := model.UserModelPath(hop)
		if err != nil {
			return err
		}
		if why := tuneVerdict(a, b, rows, learnt[op]); why != "" && !force {
			if stale[op] {
				// The model in effect was the embedded one: the user's
				// could not be loaded, so it goes.
				if err := os.Remove(path); err != nil {
					return err
				}
				fmt.Fprintf(w, "%s: removed %s, trained on features of another revision: the embedded model is in effect; %s\n", op, path, why)
				continue
			}
			fmt.Fprintf(w, "%s: kept the model in effect: %s\n", op, why)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		data := files[op]
		if err := atomicfile.Write(path, func(f io.Writer) error { _, err := f.Write(data); return err }); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: installed %s (held-out oracle ratio %.3f, was %.3f)\n", op, path, b, a)
	}
	fmt.Fprintf(w, "%.1fs of a %s budget\n", time.Since(start).Seconds(), budget)
	return nil
}

// inEffect keeps the score rows of what a model answers by default: the
// "default" row where a model defers to the rule for some heads, else the
// "gcn" row, and the rule beside it.
func inEffect(scores []train.Score) []train.Score {
	hasDefault := map[string]bool{}
	for _, s := range scores {
		if s.Predictor == train.PredictorDefault {
			hasDefault[s.Op+"/"+s.DeviceClass] = true
		}
	}
	var out []train.Score
	for _, s := range scores {
		switch {
		case s.Predictor == train.PredictorDefault, s.Predictor == train.PredictorRule,
			s.Predictor == train.PredictorGCN && !hasDefault[s.Op+"/"+s.DeviceClass]:
			out = append(out, s)
		}
	}
	return out
}

// oracleOf returns the oracle ratio of what op's model answers by
// default, over all its device classes (the geometric mean weighted by
// rows), and the number of held-out rows it is over.
func oracleOf(scores []train.Score, op string) (ratio float64, rows int) {
	logSum := 0.0
	for _, s := range inEffect(scores) {
		if s.Op == op && s.Predictor != train.PredictorRule && s.N > 0 {
			logSum += float64(s.N) * math.Log(s.OracleRatio)
			rows += s.N
		}
	}
	if rows == 0 {
		return 0, 0
	}
	return math.Exp(logSum / float64(rows)), rows
}

func countSources(rows []train.LabelRow) int {
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Source] = true
	}
	return len(seen)
}

// holdOut returns the sources of rows held out from tuning, a quarter of
// them, kept in path from run to run: each source keeps the side it was
// first given, and a new one goes where the quarter needs it, in an order
// that depends on its name and seed alone. A split made afresh each run
// (train.GroupFolds) moved as labels were added, and a second run scored
// the model the first had installed on the rows it was tuned on.
func holdOut(path string, rows []train.LabelRow, seed uint64) (map[string]bool, error) {
	held := map[string]bool{}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &held); err != nil {
			return nil, fmt.Errorf("%s: %v (remove it to draw the held-out sources again)", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var fresh []string
	for _, r := range rows {
		if _, ok := held[r.Source]; !ok && !slices.Contains(fresh, r.Source) {
			fresh = append(fresh, r.Source)
		}
	}
	rank := func(s string) uint64 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s", seed, s)
		return h.Sum64()
	}
	slices.SortFunc(fresh, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	nHeld := countHeld(held)
	for _, s := range fresh {
		// One in four, the first of each four taken: held while the
		// held are fewer than a quarter of those placed, this one too.
		held[s] = 4*nHeld < len(held)+1
		if held[s] {
			nHeld++
		}
	}
	sources := map[string]bool{}
	for _, r := range rows {
		sources[r.Source] = held[r.Source]
	}
	nHeld = countHeld(sources)
	if len(sources) < 4 || nHeld == 0 || nHeld == len(sources) {
		return nil, fmt.Errorf("hold out a quarter of the sources: the rows have %d sources, %d of them held out; tuning needs at least 4, some of each (give --count more tensors, or a larger --budget)", len(sources), nHeld)
	}
	if len(fresh) > 0 {
		data, err := json.MarshalIndent(held, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := atomicfile.WriteBytes(path, data); err != nil {
			return nil, err
		}
	}
	return sources, nil
}

// countHeld returns how many sources of held are held out.
func countHeld(held map[string]bool) int {
	n := 0
	for _, h := range held {
		if h {
			n++
		}
	}
	return n
}

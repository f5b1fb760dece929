package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/model"
)

func init() { register(newPredictCmd) }

func newPredictCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "predict [FILE]",
		Short: "Choose the best storage format per op, mode and device",
		Long: `Rank the candidate storage formats of a tensor for an op and mode (1-based)
on a device, with one of the predictors:

  gcn      a model file (--model; default: the user's from tune-model, else
           the embedded one): per device class, its SPT-GCN (--runtime
           builtin or onnx-go), or, for the heads where evaluation put
           them ahead, the hand rule or boosted trees on the global
           features (the row's predictor then reads gcn/rule or
           gcn/boosted; gcn/blend where the trees were unsure, under
           the head's blend margin, and the network was asked too;
           sparsetune model inspect FILE lists them)
  network  the SPT-GCN of the model file for every head, even those that
           answer with the rule or trees
  tree     golearn's CART decision tree on the global features, fitted on
           the labelled examples of --model (a baseline-set JSON file)
  knn      k nearest neighbours (k = 5) on the standardised global
           features, likewise (deterministic: docs/model.md, "Baselines")
  rule     a hand-written rule on the global features (docs/model.md)
  measure  time every format with the real kernels and rank by speed; the
           decision is cached per tensor, op, mode and device in the user
           cache directory and reused (--retune measures again); --greedy
           times each format once and fully only those within 1.5x of the
           fastest

It prints the chosen format, the scores and the time spent reading the
tensor's sample, computing features, encoding the graph and running the
predictor. One sample serves every mode and device of a run: each row
reports an equal share of it, and total_seconds is the row's share plus
the wall time of the rest of its decision: features, encoding, inference,
ranking and checks, or a cache lookup. With every mode asked for of a
model, the modes' decisions run side by side on up to as many cores as
modes, and each row reports a share of their wall time in proportion to
its own decision's (docs/model.md, "Prediction cost").

Without FILE, predict uses the embedded sample tensor.`,
		Args: optionalArg("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := predictConfigFrom(v)
			if err != nil {
				return err
			}
			// The rule and measure-all read no summary: nothing to pick.
			pick := cfg.predictor != "rule" && cfg.predictor != "measure"
			name, t, picks, _, err := loadTensorPicked(cmd.ErrOrStderr(), args, pick)
			if err != nil {
				return err
			}
			return runPredict(cmd.OutOrStdout(), cmd.ErrOrStderr(), name, t, picks, cfg, v.GetBool("json"))
		},
	}
	f := cmd.Flags()
	f.String("op", "ttm", "operation: ttm or mttkrp")
	f.String("mode", "all", "mode (1-based) or all")
	f.String("device", "cpu", "device: cpu, BACKEND:INDEX, or all")
	f.String("predictor", "gcn", "gcn, network, tree, knn, rule or measure")
	f.String("model", "", "model file: ONNX for gcn (default: the user's model from tune-model, else the embedded one), a baseline set for tree and knn")
	f.String("runtime", "builtin", "gcn: how to run the ONNX file, builtin (float32 interpreter) or onnx-go")
	f.Bool("retune", false, "measure: ignore the cached decision and measure again")
	f.Bool("greedy", false, "measure: early cut (one run each, then full timing of the formats within 1.5x of the fastest)")
	f.Int("rank", 16, "rank R of the dense operands: measure times at it; a model with heads learnt at several ranks answers with the nearest, and a learnt answer far from its head's rank says so")
	f.Int("iters", 5, "measure: timed runs per format")
	for _, name := range []string{"op", "mode", "device", "predictor", "model", "runtime", "retune", "greedy", "rank", "iters"} {
		_ = v.BindPFlag("predict."+name, f.Lookup(name))
	}
	return cmd
}

type predictConfig struct {
	op        hetero.Op
	mode      int // 1-based; 0 for all
	devices   []string
	predictor string
	model     string
	runtime   string
	retune    bool
	greedy    bool
	rank      int
	iters     int
	threads   int
}

func predictConfigFrom(v *viper.Viper) (predictConfig, error) {
	c := predictConfig{predictor: v.GetString("predict.predictor"), model: v.GetString("predict.model"), runtime: v.GetString("predict.runtime"),
		retune: v.GetBool("predict.retune"), greedy: v.GetBool("predict.greedy"), rank: v.GetInt("predict.rank"),
		iters: v.GetInt("predict.iters"), threads: v.GetInt("threads")}
	var err error
	if c.op, err = hetero.ParseOp(v.GetString("predict.op")); err != nil {
		return c, fmt.Errorf("--op: %w", err)
	}
	if m := v.GetString("predict.mode"); m != "all" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 {
			return c, fmt.Errorf("--mode: expected a 1-based mode or all, found %q", m)
		}
		c.mode = n
	}
	switch d := v.GetString("predict.device"); d {
	case "all":
		c.devices = hetero.Available()
	default:
		c.devices = []string{d}
	}
	switch c.predictor {
	case "gcn", "network":
	case "tree", "knn":
		if c.model == "" {
			return c, fmt.Errorf("--predictor %s needs --model FILE: a baseline set of labelled examples", c.predictor)
		}
	case "svm":
		return c, fmt.Errorf("--predictor svm: not available: golearn's linear SVM wraps liblinear through cgo and panics under Go's cgo pointer checks; use tree or knn")
	case "rule", "measure":
	default:
		return c, fmt.Errorf("--predictor: unknown predictor %q, expected gcn, network, tree, knn, rule or measure", c.predictor)
	}
	if !slices.Contains(model.Runtimes, c.runtime) {
		return c, fmt.Errorf("--runtime: unknown runtime %q, expected %s", c.runtime, strings.Join(model.Runtimes, " or "))
	}
	if c.rank < 1 || c.iters < 1 {
		return c, fmt.Errorf("--rank and --iters must be at least 1, found %d and %d", c.rank, c.iters)
	}
	return c, nil
}

// measureFallback times every format of c.op along mode on dev, or takes
// the decision cached for this tensor: what a device whose class the model
// has no head for gets. It reports whether the decision was cached.
func measureFallback(t *formats.COO, id *model.TensorID, dev hetero.Device, c predictConfig, mode int) (*model.Prediction, bool, error) {
	decisions, err := model.DefaultDecisions()
	if err != nil {
		return nil, false, err
	}
	if d, ok := decisions.Get(id, c.op, mode, dev.Info().Name, "measure"); ok && !c.retune {
		return d.Prediction, true, nil
	}
	pr, err := model.MeasureAll{Device: dev, Rank: c.rank, Iters: c.iters}.Predict(t, c.op, mode, dev.Info().Kind)
	if err != nil {
		return nil, false, err
	}
	d := &model.Decision{Key: id.Key, Fingerprint: id.Fingerprint(), Op: c.op.String(), Mode: mode + 1, Device: dev.Info().Name, Predictor: "measure", Prediction: pr}
	if err := decisions.Put(d, c.op, mode); err != nil {
		pr.Warnings = append(pr.Warnings, err.Error())
	}
	return pr, false, nil
}

// predictRow is one line of predict's output; modes are 1-based, times
// in seconds.
type predictRow struct {
	Op               string         `json:"op"`
	Mode             int            `json:"mode"`
	Device           string         `json:"device"`
	Predictor        string         `json:"predictor"`
	Head             string         `json:"head,omitempty"` // the model head that answered, for gcn and network
	Format           string         `json:"format"`
	Formats          []model.Ranked `json:"formats"`
	SampleSeconds    float64        `json:"sample_seconds"` // this row's share of the shared summary, when it used it
	FeaturesSeconds  float64        `json:"features_seconds"`
	EncodingSeconds  float64        `json:"encoding_seconds"`
	InferenceSeconds float64        `json:"inference_seconds"` // measuring, for measure
	TotalSeconds     float64        `json:"total_seconds"`     // the whole decision: its share of the summary and the wall time of the rest
	Cached           bool           `json:"cached"`
	Warnings         []string       `json:"warnings,omitempty"`

	usedSummary bool // it asked for the shared summary, and gets a share of its time
}

// helperSpin bounds how long predict's helper polls for the modes'
// decisions (par.StartHelper): long enough to outlast reading a user's
// model file from disk before them (about 40 ms: docs/model.md), short
// enough that a run that never gets to them wastes little.
const helperSpin = 50 * time.Millisecond

// modePrediction is one mode's decision made ahead of its row
// (predictModes), and the time it took.
type modePrediction struct {
	pr   *model.Prediction
	err  error
	took time.Duration
}

// predictModes makes p's decision for every mode of s's tensor, the modes
// shared between this goroutine and h's, and returns them by mode, and
// the wall time of all of them. A row reports the share of that wall time
// in proportion to its own decision's time: the rows' totals add up to
// the wall time, which on two cores is about half the sum of the
// decisions.
func predictModes(h *par.Helper, p model.SummaryPredictor, s *features.Summary, op hetero.Op, dev hetero.Info) ([]modePrediction, time.Duration) {
	start := time.Now()
	out := make([]modePrediction, len(s.Dims))
	order := sideBySideOrder(len(out))
	h.Each(len(out), func(i int) {
		m := order[i]
		t0 := time.Now()
		out[m].pr, out[m].err = model.PredictOn(p, s, op, m, dev)
		out[m].took = time.Since(t0)
	})
	return out, time.Since(start)
}

// sideBySideOrder returns the order in which predictModes hands out the
// modes of an order-n tensor: the first, the last, then the rest. The
// caller's goroutine and the helper's start on the first two at once,
// and MTTKRP along every mode but the last reads the fibers of the last
// mode, along the last those of the one before (features.Summary.Global):
// the first and the last mode share no count, so neither decision waits
// for the other's (a summary counts each once, the second asker waiting
// on the first), where the first and the second would share the fiber
// count.
func sideBySideOrder(n int) []int {
	order := make([]int, 0, n)
	if n > 0 {
		order = append(order, 0)
	}
	if n > 1 {
		order = append(order, n-1)
	}
	for m := 1; m < n-1; m++ {
		order = append(order, m)
	}
	return order
}

// runPredict predicts for t as c says. picks, when not nil, are the
// summary's sample as the reader picked it (loadTensorPicked): the
// summary is made from them, and what picking cost counts in the sample's
// time.
func runPredict(stdout, stderr io.Writer, name string, t *formats.COO, picks *formats.Picks, c predictConfig, asJSON bool) error {
	if c.mode > t.Order() {
		return fmt.Errorf("--mode: %s has modes 1 to %d, found %d", name, t.Order(), c.mode)
	}
	var gcn *model.ONNXModel
	if c.predictor == "gcn" || c.predictor == "network" {
		var err error
		if c.model != "" {
			gcn, err = model.LoadONNX(c.model)
		} else if gcn, err = model.DefaultModel(c.op); errors.Is(err, model.ErrNoDefault) {
			fmt.Fprintf(stderr, "note: %v: using the hand rule (--predictor rule)\n", err)
			c.predictor, err = "rule", nil
		}
		if err != nil {
			return err
		}
		if gcn != nil {
			if err := gcn.UseRuntime(c.runtime); err != nil {
				return err
			}
		}
	}
	var baseline *model.BaselinePredictor
	if c.predictor == "tree" || c.predictor == "knn" {
		set, err := model.ReadBaselineSet(c.model)
		if err != nil {
			return err
		}
		if baseline, err = model.NewBaselinePredictor(c.predictor, set); err != nil {
			return fmt.Errorf("%s: %w", c.model, err)
		}
	}
	var decisions *model.Decisions
	if c.predictor == "measure" {
		var err error
		if decisions, err = model.DefaultDecisions(); err != nil {
			return err
		}
	}
	// One summary serves every row; its time (sampleTime: making it, and
	// the reader's picking) is shared among the rows that used it.
	// summaryWall is the part of it spent on this goroutine, which the
	// row that made the summary does not count as its own; summaryCalls
	// tells which rows asked for it.
	var summary *features.Summary
	var sampleTime, summaryWall time.Duration
	summaryCalls := 0
	// With every mode asked for of a model, the modes' decisions are made
	// side by side, on this goroutine and on a helper's, one fewer than
	// the modes and the processors, started now to poll while the model
	// loads below (par.Helper says why they must be running before the
	// decisions start); each row then reports a share of their wall time
	// (predictModes).
	//
	// Another core, the helper's or one started for it, meanwhile runs the
	// CPU's decisions once on a small tensor of its own (model's Warm):
	// the code, the allocator and the trees are then warm for the real
	// ones, on that core and in the process, and it stops when they
	// start (docs/model.md, "Warm before the first decision").
	var warm func(busy func() bool)
	if gcn != nil && slices.Contains(c.devices, "cpu") {
		gp := model.GCNPredictor{Model: gcn, Network: c.predictor == "network", Rank: c.rank}
		dev, order, op := hetero.NewCPU(c.threads).Info(), t.Order(), c.op
		warm = func(busy func() bool) { gp.Warm(op, order, dev, busy) }
	}
	var helper *par.Helper
	var deciding atomic.Bool // a row's decision has begun
	if c.mode == 0 && t.Order() > 1 && (c.predictor == "gcn" || c.predictor == "network") {
		helper = par.StartHelper(t.Order()-1, helperSpin, warm)
		defer helper.Stop()
	} else if warm != nil && runtime.GOMAXPROCS(0) > 1 {
		go warm(deciding.Load)
	}
	batch := helper != nil
	// summarize makes the summary when a row first needs one: the rule,
	// and a model head that defers to it, need nothing of the tensor.
	summarize := func() error {
		summaryCalls++
		if summary != nil {
			return nil
		}
		start := time.Now()
		defer func() { summaryWall += time.Since(start) }()
		var err error
		if summary, err = features.SummarizePicked(t, picks); err != nil {
			return err
		}
		if picks != nil {
			sampleTime += picks.Took
		}
		if c.mode == 0 && !batch {
			// Every mode will be asked for: count what the op reads
			// along all of them at once, on every core, as part of the
			// shared pass. Decisions made side by side count what
			// they need as they go, each on its core.
			summary.Prepare(c.op)
		}
		sampleTime += time.Since(start)
		return nil
	}
	// id names the tensor in the decision cache: a key of the summary's
	// sample, and the whole tensor's fingerprint only where a decision
	// is filed under the key (model.SampleKey).
	var id *model.TensorID
	tensorID := func() (*model.TensorID, error) {
		if err := summarize(); err != nil { // made once; counts the row as a user
			return nil, err
		}
		if id == nil {
			id = model.NewTensorID(t, summary)
		}
		return id, nil
	}
	var rows []predictRow
	noHeadNoted := map[string]bool{}
	for _, devName := range c.devices {
		dev, err := hetero.Lookup(devName, c.threads)
		if err != nil {
			return err
		}
		kind := dev.Info().Kind
		// The predictor, and the ways it can answer, taken from its type
		// here, conversions whose method tables the compiler makes,
		// rather than asked by type assertions in each row: an assertion
		// to an interface makes the runtime build the pair's table on
		// first use, in memory it takes fresh, and in a fresh process
		// that page fault was a tenth of the first decision
		// (docs/model.md, "Where a fresh decision's time goes").
		var (
			p  model.Predictor
			sp model.SummaryPredictor     // nil: p reads the tensor itself (Predict)
			sf model.SummaryFreePredictor // nil: p always needs the summary
		)
		switch c.predictor {
		case "gcn", "network":
			gp := model.GCNPredictor{Model: gcn, Class: dev.Info().Class(), Network: c.predictor == "network", Rank: c.rank}
			// The head's trees are part of the model's load, which the
			// rows' times leave out.
			if err := gp.Load(dev.Info()); err != nil {
				return err
			}
			p, sp, sf = gp, gp, gp
		case "tree", "knn":
			p, sp = baseline, baseline
		case "rule":
			r := model.RulePredictor{}
			p, sp, sf = r, r, r
		case "measure":
			// It measures the tensor: no summary.
			p = model.MeasureAll{Device: dev, Rank: c.rank, Iters: c.iters, Greedy: c.greedy}
		}
		// ahead holds the decisions of every mode made at once, on the
		// first row that needs one, by mode; aheadWall is their wall time,
		// aheadTook the sum of their own times.
		var ahead []modePrediction
		var aheadWall, aheadTook time.Duration
		for mode := range t.Order() {
			if c.mode != 0 && mode != c.mode-1 {
				continue
			}
			row := predictRow{Op: c.op.String(), Mode: mode + 1, Device: dev.Info().Name, Predictor: c.predictor}
			// The row's own time: all of its decision but the summary.
			deciding.Store(true)
			rowStart, wall0, calls0, ahead0 := time.Now(), summaryWall, summaryCalls, aheadWall
			var share time.Duration // of the decisions made ahead
			var pr *model.Prediction
			key := c.predictor
			if c.greedy {
				key += "-greedy"
			}
			if decisions != nil && !c.retune {
				tid, err := tensorID()
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if d, ok := decisions.Get(tid, c.op, mode, row.Device, key); ok {
					pr, row.Cached = d.Prediction, true
				}
			}
			if pr == nil {
				if c.predictor == "measure" {
					fmt.Fprintf(stderr, "measuring %s mode %d on %s...\n", c.op, mode+1, row.Device)
				}
				free := false
				if sf != nil {
					pr, free = sf.PredictWithoutSummary(c.op, mode, dev.Info())
				}
				switch {
				case free:
				case sp != nil:
					if err = summarize(); err == nil {
						// A predictor that tells devices apart is told
						// which (the class, and a CPU's processor), as
						// the engine tells it.
						if !batch {
							pr, err = model.PredictOn(sp, summary, c.op, mode, dev.Info())
						} else {
							if ahead == nil {
								ahead, aheadWall = predictModes(helper, sp, summary, c.op, dev.Info())
								for _, a := range ahead {
									aheadTook += a.took
								}
							}
							a := ahead[mode]
							pr, err = a.pr, a.err
							if aheadTook > 0 {
								share = time.Duration(float64(aheadWall) * float64(a.took) / float64(aheadTook))
							}
						}
					}
				default:
					pr, err = p.Predict(t, c.op, mode, kind)
				}
				if errors.Is(err, model.ErrNoHead) {
					// Not trained on this kind of hardware: measure, once
					// per tensor, never ask another class's head.
					if !noHeadNoted[row.Device] {
						fmt.Fprintf(stderr, "note: %s: the model has no head for device class %s (it was not trained on this kind of hardware): measuring every format on it instead; the decision is cached\n", row.Device, dev.Info().Class())
						noHeadNoted[row.Device] = true
					}
					// Measuring times the kernels on every core: the
					// helper, if any, must not poll beside them.
					helper.Stop()
					var tid *model.TensorID
					if tid, err = tensorID(); err == nil {
						pr, row.Cached, err = measureFallback(t, tid, dev, c, mode)
					}
					row.Predictor = "measure"
				}
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if decisions != nil {
					tid, err := tensorID()
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					d := &model.Decision{Key: tid.Key, Fingerprint: tid.Fingerprint(), Op: c.op.String(), Mode: mode + 1, Device: row.Device, Predictor: key, Prediction: pr}
					if err := decisions.Put(d, c.op, mode); err != nil {
						fmt.Fprintf(stderr, "warning: %v\n", err)
					}
				}
			}
			if pr.By != "" && row.Predictor != "measure" {
				// The model defers to the rule for this head (docs/model.md).
				row.Predictor += "/" + pr.By
			}
			row.Format, row.Formats, row.Warnings, row.Head = pr.Best(), pr.Formats, pr.Warnings, pr.Head
			if w := model.RankNote(pr.LearntRanks, c.rank); w != "" {
				row.Warnings = append(row.Warnings, w)
			}
			row.FeaturesSeconds, row.EncodingSeconds, row.InferenceSeconds = pr.Features.Seconds(), pr.Encoding.Seconds(), pr.Infer.Seconds()
			// A predictor that summarised the tensor itself (Predict)
			// reports that in Sample, which its wall time holds.
			row.SampleSeconds = pr.Sample.Seconds()
			row.TotalSeconds = (time.Since(rowStart) - (summaryWall - wall0) - (aheadWall - ahead0) + share).Seconds()
			row.usedSummary = summaryCalls > calls0
			rows = append(rows, row)
		}
	}
	// Each row that asked for the summary (to predict from, or to look its
	// decision up) gets an equal share of it, in sample_seconds and in its
	// total.
	users := 0
	for _, r := range rows {
		if r.usedSummary {
			users++
		}
	}
	for i := range rows {
		if rows[i].usedSummary {
			rows[i].SampleSeconds = sampleTime.Seconds() / float64(users)
			rows[i].TotalSeconds += rows[i].SampleSeconds
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "op\tmode\tdevice\tpredictor\tformat\tscores\tsample ms\tfeatures ms\tencoding ms\tpredictor ms\ttotal ms\n")
	for _, r := range rows {
		var scores []string
		for _, f := range r.Formats {
			scores = append(scores, fmt.Sprintf("%s %.3f", f.Format, f.Score))
		}
		pred := r.Predictor
		if r.Cached {
			pred += " (cached)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", r.Op, r.Mode, r.Device, pred, r.Format, strings.Join(scores, ", "),
			r.SampleSeconds*1e3, r.FeaturesSeconds*1e3, r.EncodingSeconds*1e3, r.InferenceSeconds*1e3, r.TotalSeconds*1e3)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A warning that several rows share (the model's hardware) is
	// printed once, with the modes it concerns.
	var order []string
	modes := map[string][]string{}
	for _, r := range rows {
		for _, w := range r.Warnings {
			if _, ok := modes[w]; !ok {
				order = append(order, w)
			}
			if m := strconv.Itoa(r.Mode); !slices.Contains(modes[w], m) {
				modes[w] = append(modes[w], m)
			}
		}
	}
	for _, w := range order {
		m := modes[w]
		what := "mode " + m[0]
		if len(m) > 1 {
			what = "modes " + strings.Join(m, ",")
		}
		fmt.Fprintf(stderr, "warning: %s %s: %s\n", c.op, what, w)
	}
	return nil
}

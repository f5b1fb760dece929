package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/graphenc"
)

// Head is one classifier on the shared graph readout: the formats it
// ranks for one device class. Labels belong to hardware, so a head is
// named by the class its training labels were measured on.
type Head struct {
	Name    string   // the device class (hetero.Info.Class): "cpu", "opencl-cpu", "cuda-gpu", ...
	Classes []string // format names, in output order
}

// Config is the shape of a GCN.
type Config struct {
	Op     string          // the operation the model predicts for: "ttm" or "mttkrp"
	Budget graphenc.Budget // graph input shape
	Hidden int             // width of the graph-convolution layers
	MLP    [2]int          // widths of each head's hidden layers
	Heads  []Head
}

// DefaultConfig returns the architecture of DESIGN.md for op and heads,
// sized so a prediction costs a small part of a kernel run: the default
// budget, graph layers of width 16, heads 64 → 32 → classes. Width 16
// cross-validated as well as 32 on the MTTKRP labels (docs/model.md) and
// runs the network in 23 µs instead of 33.
func DefaultConfig(op string, heads ...Head) Config {
	return Config{Op: op, Budget: graphenc.DefaultBudget, Hidden: 16, MLP: [2]int{64, 32}, Heads: heads}
}

func (c Config) validate() error {
	if c.Budget.Rows < 1 || c.Budget.Cols < 1 || c.Hidden < 1 || c.MLP[0] < 1 || c.MLP[1] < 1 {
		return fmt.Errorf("model config: budget %dx%d, hidden %d, MLP %v: all must be at least 1", c.Budget.Rows, c.Budget.Cols, c.Hidden, c.MLP)
	}
	if len(c.Heads) == 0 {
		return fmt.Errorf("model config: no heads")
	}
	for _, h := range c.Heads {
		if len(h.Classes) < 2 {
			return fmt.Errorf("model config: head %q has %d classes, expected at least 2", h.Name, len(h.Classes))
		}
	}
	return nil
}

// readoutWidth is the length of the vector each head reads: the row and
// column readouts of both layers, then the global features.
func (c Config) readoutWidth() int { return 4*c.Hidden + features.Count }

// GCN is the SPT-GCN: two graph-convolution layers over the bipartite
// graph of package graphenc, a masked-sum readout of each layer's row and
// column nodes, and per head an MLP on the readouts and the standardised
// global features.
//
// A layer maps row nodes R and column nodes C (one row each) to
//
//	R' = mR ⊙ ReLU(R·W1r + (A·C)·W2/Bc + (1·s − R)·W3/N + b)
//	C' = mC ⊙ ReLU(C·W1c + (Aᵀ·R)·W2/Br + (1·s − C)·W3/N + b)
//
// with A the normalised biadjacency, mR and mC the node masks, s = mRᵀR +
// mCᵀC the sum over every node (so 1·s − R sums all the other nodes: the
// global term), Br and Bc the budget and N = Br + Bc. The constant scales
// keep each term's size independent of the budget. W1 is split by side, so
// the layer knows rows from columns. The readout of a layer is mRᵀR'/Br and
// mCᵀC'/Bc. A head is ReLU(z·M1 + c1), ReLU(·M2 + c2), ·M3 + c3, softmax.
type GCN struct {
	Config Config
	// Params holds every trainable weight, in the order views lays out.
	Params []float64
	// Mean and Std standardise the global features: (v − Mean)/Std.
	Mean, Std features.Vector
	// TrainMin and TrainMax bound the global features seen in training: a
	// tensor outside them gets a prediction and a warning.
	TrainMin, TrainMax features.Vector
	// RuleHeads are the heads for which evaluation did not find the
	// network's picks faster than the hand rule's (RuleChoice; by
	// train.RuleMargin): the model file records them,
	// and GCNPredictor answers for them with the rule.
	RuleHeads []string
	// Trees are the heads, by name, for which evaluation found boosted
	// trees on the global features (FitTrees) at least as good as the
	// network: the model file holds them beside the network, and
	// GCNPredictor answers for those heads with them. A rule head has
	// none.
	Trees map[string]*Trees
	// BlendMargins are, for heads with trees, how sure the trees must be
	// to answer alone: where their most probable class is ahead of the
	// next by less than the head's margin, GCNPredictor asks the network
	// too and answers with the mean of the two (Blend). Training picks
	// each margin by cross-validation; a head without one answers with
	// its trees alone, and +Inf means always the mean.
	BlendMargins map[string]float64
	// CPUInnerLoops are the inner loops (kernels.InnerLoops) of the builds
	// that measured the cpu head's labels. Which format is fastest on a
	// CPU depends on them: a prediction on a CPU that runs others carries
	// a warning (GCNPredictor).
	CPUInnerLoops []string
	// CPUModels are, per cpu head, the processors (hetero.Info.Model)
	// whose times trained it; entries for other names are not written.
	// Which format is fastest differs between microarchitectures that run
	// the same inner loops: a prediction on another processor carries a
	// warning (GCNPredictor.DeviceModel).
	CPUModels map[string][]string
	// LabelRanks are, per head, the ranks (columns of the dense
	// operands) at which its labels were timed, in increasing order;
	// a head without an entry has none recorded. Which format is
	// fastest moves with the rank (docs/model.md, "The default model at
	// other ranks"): a prediction carries its head's ranks
	// (Prediction.LearntRanks), and the engine notes a decision far from
	// them (RankNote).
	LabelRanks map[string][]int
}

// gcnLayer and gcnHead are views of one layer's and one head's weights.
type gcnLayer struct{ w1r, w1c, w2, w3, b matrix }

type gcnHead struct{ m1, c1, m2, c2, m3, c3 matrix }

// views lays the weights out in p (Params or a gradient of the same
// length); with p nil it only counts them.
func (c Config) views(p []float64) (layers [2]gcnLayer, heads []gcnHead, n int) {
	take := func(r, cols int) matrix {
		m := matrix{r: r, c: cols}
		if p != nil {
			m.d = p[n : n+r*cols : n+r*cols]
		}
		n += r * cols
		return m
	}
	in := graphenc.NodeFeatures
	for l := range layers {
		h := c.Hidden
		layers[l] = gcnLayer{w1r: take(in, h), w1c: take(in, h), w2: take(in, h), w3: take(in, h), b: take(1, h)}
		in = h
	}
	for _, hd := range c.Heads {
		heads = append(heads, gcnHead{
			m1: take(c.readoutWidth(), c.MLP[0]), c1: take(1, c.MLP[0]),
			m2: take(c.MLP[0], c.MLP[1]), c2: take(1, c.MLP[1]),
			m3: take(c.MLP[1], len(hd.Classes)), c3: take(1, len(hd.Classes)),
		})
	}
	return layers, heads, n
}

// NewGCN returns a GCN with weights drawn from rng (Glorot-uniform; biases
// zero) and the identity standardisation.
func NewGCN(c Config, rng *rand.Rand) (*GCN, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	_, _, n := c.views(nil)
	g := &GCN{Config: c, Params: make([]float64, n)}
	for i := range g.Std {
		g.Std[i] = 1
		g.TrainMin[i], g.TrainMax[i] = features.Ranges[i][0], features.Ranges[i][1]
	}
	layers, heads, _ := c.views(g.Params)
	glorot := func(m matrix) {
		a := math.Sqrt(6 / float64(m.r+m.c))
		for i := range m.d {
			m.d[i] = a * (2*rng.Float64() - 1)
		}
	}
	for _, l := range layers {
		for _, m := range []matrix{l.w1r, l.w1c, l.w2, l.w3} {
			glorot(m)
		}
	}
	for _, h := range heads {
		for _, m := range []matrix{h.m1, h.m2, h.m3} {
			glorot(m)
		}
	}
	return g, nil
}

// Input is one example as the model reads it: graphenc's budget-shaped
// arrays and the raw global features.
type Input struct {
	Adj              []float32 // Budget.Rows x Budget.Cols
	RowFeat, ColFeat []float32 // Budget.Rows x NodeFeatures, Budget.Cols x NodeFeatures
	RowMask, ColMask []float32
	Global           features.Vector
}

// NewInput pairs a graph with its tensor's global features.
func NewInput(g *graphenc.Graph, v features.Vector) *Input {
	return &Input{Adj: g.Adj, RowFeat: g.RowFeat, ColFeat: g.ColFeat, RowMask: g.RowMask, ColMask: g.ColMask, Global: v}
}

func (c Config) checkInput(in *Input) error {
	br, bc, f := c.Budget.Rows, c.Budget.Cols, graphenc.NodeFeatures
	if len(in.Adj) != br*bc || len(in.RowFeat) != br*f || len(in.ColFeat) != bc*f || len(in.RowMask) != br || len(in.ColMask) != bc {
		return fmt.Errorf("model input: arrays of %d, %d, %d, %d, %d for a %dx%d budget", len(in.Adj), len(in.RowFeat), len(in.ColFeat), len(in.RowMask), len(in.ColMask), br, bc)
	}
	return nil
}

// pass holds one example's forward values, kept for the backward pass,
// and scratch for the backward pass itself. One pass serves one goroutine.
type pass struct {
	a, xr, xc matrix // inputs as float64
	mr, mc    []float64
	z         []float64 // readouts and standardised globals
	ls        [2]layerPass
	hs        []headPass
	// backward scratch
	dz             []float64
	dr, dc, tr, tc matrix
}

type layerPass struct {
	r, c     matrix // inputs (the previous layer's outputs or the features)
	ac, atr  matrix // A·C and Aᵀ·R
	s        []float64
	sr, sc   matrix // 1·s − R and 1·s − C
	pr, pc   matrix // pre-activations
	outR, oC matrix // outputs
	dpr, dpc matrix
}

type headPass struct {
	a1, h1, a2, h2, logits, probs []float64
}

func (g *GCN) newPass() *pass {
	c := g.Config
	br, bc, f, h := c.Budget.Rows, c.Budget.Cols, graphenc.NodeFeatures, c.Hidden
	p := &pass{a: newMatrix(br, bc), xr: newMatrix(br, f), xc: newMatrix(bc, f),
		mr: make([]float64, br), mc: make([]float64, bc), z: make([]float64, c.readoutWidth()), dz: make([]float64, c.readoutWidth()),
		dr: newMatrix(br, h), dc: newMatrix(bc, h), tr: newMatrix(br, h), tc: newMatrix(bc, h)}
	in := f
	for l := range p.ls {
		p.ls[l] = layerPass{ac: newMatrix(br, in), atr: newMatrix(bc, in), s: make([]float64, in),
			sr: newMatrix(br, in), sc: newMatrix(bc, in), pr: newMatrix(br, h), pc: newMatrix(bc, h),
			outR: newMatrix(br, h), oC: newMatrix(bc, h), dpr: newMatrix(br, h), dpc: newMatrix(bc, h)}
		in = h
	}
	p.ls[0].r, p.ls[0].c = p.xr, p.xc
	p.ls[1].r, p.ls[1].c = p.ls[0].outR, p.ls[0].oC
	for _, hd := range c.Heads {
		p.hs = append(p.hs, headPass{a1: make([]float64, c.MLP[0]), h1: make([]float64, c.MLP[0]),
			a2: make([]float64, c.MLP[1]), h2: make([]float64, c.MLP[1]),
			logits: make([]float64, len(hd.Classes)), probs: make([]float64, len(hd.Classes))})
	}
	return p
}

func copy32(dst []float64, src []float32) {
	for i, v := range src {
		dst[i] = float64(v)
	}
}

// forward runs the model on in, leaving every intermediate value in p and
// each head's probabilities in p.hs[i].probs.
func (g *GCN) forward(p *pass, in *Input) {
	c := g.Config
	layers, heads, _ := c.views(g.Params)
	copy32(p.a.d, in.Adj)
	copy32(p.xr.d, in.RowFeat)
	copy32(p.xc.d, in.ColFeat)
	copy32(p.mr, in.RowMask)
	copy32(p.mc, in.ColMask)
	br, bc := float64(c.Budget.Rows), float64(c.Budget.Cols)
	n := br + bc
	for l := range p.ls {
		lp, w := &p.ls[l], layers[l]
		mul(lp.ac, p.a, false, lp.c, false, 1, 0)
		mul(lp.atr, p.a, true, lp.r, false, 1, 0)
		vecMul(lp.s, p.mr, lp.r, 1, 0)
		vecMul(lp.s, p.mc, lp.c, 1, 1)
		for _, side := range []struct{ s, x matrix }{{lp.sr, lp.r}, {lp.sc, lp.c}} {
			for i := range side.x.r {
				row, xr := side.s.row(i), side.x.row(i)
				for j := range row {
					row[j] = lp.s[j] - xr[j]
				}
			}
		}
		for _, side := range []struct {
			pre, x, nb, glob, out matrix
			w1                    matrix
			nbScale               float64
			mask                  []float64
		}{{lp.pr, lp.r, lp.ac, lp.sr, lp.outR, w.w1r, 1 / bc, p.mr}, {lp.pc, lp.c, lp.atr, lp.sc, lp.oC, w.w1c, 1 / br, p.mc}} {
			for i := range side.pre.r {
				copy(side.pre.row(i), w.b.d)
			}
			mul(side.pre, side.x, false, side.w1, false, 1, 1)
			mul(side.pre, side.nb, false, w.w2, false, side.nbScale, 1)
			mul(side.pre, side.glob, false, w.w3, false, 1/n, 1)
			for i := range side.pre.r {
				pre, out := side.pre.row(i), side.out.row(i)
				for j, v := range pre {
					out[j] = side.mask[i] * max(v, 0)
				}
			}
		}
	}
	h := c.Hidden
	vecMul(p.z[0:h], p.mr, p.ls[0].outR, 1/br, 0)
	vecMul(p.z[h:2*h], p.mc, p.ls[0].oC, 1/bc, 0)
	vecMul(p.z[2*h:3*h], p.mr, p.ls[1].outR, 1/br, 0)
	vecMul(p.z[3*h:4*h], p.mc, p.ls[1].oC, 1/bc, 0)
	for i, v := range in.Global {
		p.z[4*h+i] = (v - g.Mean[i]) / g.Std[i]
	}
	for k, w := range heads {
		hp := &p.hs[k]
		dense(hp.a1, p.z, w.m1, w.c1.d)
		relu(hp.h1, hp.a1)
		dense(hp.a2, hp.h1, w.m2, w.c2.d)
		relu(hp.h2, hp.a2)
		dense(hp.logits, hp.h2, w.m3, w.c3.d)
		softmax(hp.probs, hp.logits)
	}
}

// dense sets dst = x·m + bias.
func dense(dst, x []float64, m matrix, bias []float64) {
	copy(dst, bias)
	vecMul(dst, x, m, 1, 1)
}

func relu(dst, src []float64) {
	for i, v := range src {
		dst[i] = max(v, 0)
	}
}

// softmax sets dst to the softmax of logits; dst may be logits itself
// (the trees score in place: Trees.Probs).
func softmax(dst, logits []float64) {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, v)
	}
	sum := 0.0
	for i, v := range logits {
		dst[i] = math.Exp(v - mx)
		sum += dst[i]
	}
	for i := range dst {
		dst[i] /= sum
	}
}

// loss returns the summed negative log-likelihood of the labels (one per
// head; a negative label is skipped) after forward.
func (p *pass) loss(e *Example) float64 {
	l := 0.0
	for k, y := range e.Labels {
		if y < 0 {
			continue
		}
		if q := e.target(k); q != nil {
			for c, qc := range q {
				if qc > 0 {
					l -= qc * math.Log(max(p.hs[k].probs[c], 1e-300))
				}
			}
			continue
		}
		l -= math.Log(max(p.hs[k].probs[y], 1e-300))
	}
	return l
}

// backward adds to grad (laid out like Params) the gradient of loss(e)
// after forward(p, e.In).
func (g *GCN) backward(p *pass, e *Example, grad []float64) {
	c := g.Config
	layers, heads, _ := c.views(g.Params)
	gl, gh, _ := c.views(grad)
	clear(p.dz)
	for k, y := range e.Labels {
		if y < 0 {
			continue
		}
		hp, w, dw := &p.hs[k], heads[k], gh[k]
		dlog := make([]float64, len(hp.probs))
		copy(dlog, hp.probs)
		if q := e.target(k); q != nil {
			// The softmax's cross-entropy against q: p - q.
			axpy(dlog, q, -1)
		} else {
			dlog[y]--
		}
		// logits = h2·M3 + c3
		addOuter(dw.m3, hp.h2, dlog, 1)
		axpy(dw.c3.d, dlog, 1)
		dh2 := make([]float64, len(hp.h2))
		matVec(dh2, w.m3, dlog)
		reluBack(dh2, hp.a2)
		addOuter(dw.m2, hp.h1, dh2, 1)
		axpy(dw.c2.d, dh2, 1)
		dh1 := make([]float64, len(hp.h1))
		matVec(dh1, w.m2, dh2)
		reluBack(dh1, hp.a1)
		addOuter(dw.m1, p.z, dh1, 1)
		axpy(dw.c1.d, dh1, 1)
		dz := make([]float64, len(p.z))
		matVec(dz, w.m1, dh1)
		axpy(p.dz, dz, 1)
	}

	br, bc := float64(c.Budget.Rows), float64(c.Budget.Cols)
	n := br + bc
	h := c.Hidden
	// Gradients of the outputs of layer 2 come from its readout only.
	p.dr.zero()
	p.dc.zero()
	addOuter(p.dr, p.mr, p.dz[2*h:3*h], 1/br)
	addOuter(p.dc, p.mc, p.dz[3*h:4*h], 1/bc)
	for l := len(p.ls) - 1; l >= 0; l-- {
		lp, w, dw := &p.ls[l], layers[l], gl[l]
		// Through the mask and the ReLU.
		for _, side := range []struct {
			dp, dout, pre matrix
			mask          []float64
		}{{lp.dpr, p.dr, lp.pr, p.mr}, {lp.dpc, p.dc, lp.pc, p.mc}} {
			for i := range side.dp.r {
				dp, do, pre := side.dp.row(i), side.dout.row(i), side.pre.row(i)
				for j := range dp {
					if pre[j] > 0 {
						dp[j] = side.mask[i] * do[j]
					} else {
						dp[j] = 0
					}
				}
			}
		}
		mul(dw.w1r, lp.r, true, lp.dpr, false, 1, 1)
		mul(dw.w1c, lp.c, true, lp.dpc, false, 1, 1)
		mul(dw.w2, lp.ac, true, lp.dpr, false, 1/bc, 1)
		mul(dw.w2, lp.atr, true, lp.dpc, false, 1/br, 1)
		mul(dw.w3, lp.sr, true, lp.dpr, false, 1/n, 1)
		mul(dw.w3, lp.sc, true, lp.dpc, false, 1/n, 1)
		for i := range lp.dpr.r {
			axpy(dw.b.d, lp.dpr.row(i), 1)
		}
		for i := range lp.dpc.r {
			axpy(dw.b.d, lp.dpc.row(i), 1)
		}
		if l == 0 {
			break
		}
		// Gradients of this layer's inputs, the previous layer's outputs:
		// dR = dPR·W1rᵀ − dPR·W3ᵀ/N + A·(dPC·W2ᵀ)/Br + mR·dsᵀ, and the
		// same for C with Aᵀ, plus the previous layer's readout.
		// Layers after the first read H-wide inputs, the scratch's width.
		in := lp.r.c
		dR, dC, tR, tC := p.dr, p.dc, p.tr, p.tc
		mul(dR, lp.dpr, false, w.w1r, true, 1, 0)
		mul(dR, lp.dpr, false, w.w3, true, -1/n, 1)
		mul(dC, lp.dpc, false, w.w1c, true, 1, 0)
		mul(dC, lp.dpc, false, w.w3, true, -1/n, 1)
		mul(tC, lp.dpc, false, w.w2, true, 1/br, 0) // dPC·W2ᵀ/Br, for R
		mul(dR, p.a, false, tC, false, 1, 1)
		mul(tR, lp.dpr, false, w.w2, true, 1/bc, 0) // dPR·W2ᵀ/Bc, for C
		mul(dC, p.a, true, tR, false, 1, 1)
		ds := make([]float64, in)
		for i := range lp.dpr.r {
			axpy(ds, lp.dpr.row(i), 1)
		}
		for i := range lp.dpc.r {
			axpy(ds, lp.dpc.row(i), 1)
		}
		dsw := make([]float64, in)
		matVec(dsw, w.w3, ds)
		addOuter(dR, p.mr, dsw, 1/n)
		addOuter(dC, p.mc, dsw, 1/n)
		addOuter(dR, p.mr, p.dz[0:h], 1/br)
		addOuter(dC, p.mc, p.dz[h:2*h], 1/bc)
	}
}

// axpy adds alpha·x to y.
func axpy(y, x []float64, alpha float64) {
	for i, v := range x {
		y[i] += alpha * v
	}
}

// matVec sets dst = m·x (dst of length m.r, x of m.c).
func matVec(dst []float64, m matrix, x []float64) {
	for i := range dst {
		s := 0.0
		for j, v := range m.row(i) {
			s += v * x[j]
		}
		dst[i] = s
	}
}

// reluBack zeroes the gradient where the pre-activation was not positive.
func reluBack(d, pre []float64) {
	for i, v := range pre {
		if v <= 0 {
			d[i] = 0
		}
	}
}

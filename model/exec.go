package model

import (
	"fmt"

	"math"
	"slices"

	"github.com/sparsetune/sparsetune/internal/warm"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// Runtimes are the ways a model file can be run: "builtin", this
// package's float32 interpreter of the graph (the default), and
// "onnx-go", the onnx-go library.
//
// Why two: onnx-go builds the graph into gorgonia's tape machine, which
// allocates about 1,300 times per run and costs 0.35 ms on a 32-node graph
// and 1.3 ms on a 128-node one (2 cores), more than the kernels a
// prediction tunes at 10^6 nonzeros. The builtin interpreter executes the
// same file, node by node, in buffers allocated once per instance: no
// allocation per run. A test holds the two to the same outputs.
var Runtimes = []string{"builtin", "onnx-go"}

// program is an ONNX graph compiled for the builtin runtime: every value
// is a 2-D float32 matrix of fixed shape with its own buffer, and the
// nodes run in file order (ONNX requires it to be topological).
type program struct {
	shapes  [][2]int    // per value
	consts  [][]float32 // per value: the initializer's data, or nil
	inputs  []int       // value of each graph input, in order
	outputs []int       // value of each graph output, in order
	steps   []step

	// slot[v] is the shared buffer of intermediate value v, or -1 for
	// the inputs, initializers and outputs, which have their own
	// (assignSlots); slotSize[k] is slot k's length.
	slot     []int
	slotSize []int

	// needs[k][i] says whether output k depends on step i.
	needs [][]bool
}

// step is one node: an operator on values.
type step struct {
	op      opKind
	in      []int
	out     int
	rowWise bool // Add/Sub/Mul: the second operand is one row, added to every row
}

type opKind int

const (
	opMatMul opKind = iota
	opAdd
	opSub
	opMul
	opRelu
	opTranspose
	opConcat
	opSoftmax
)

// opArity is the number of inputs of each operator with a fixed number
// (Concat takes any).
var opArity = map[opKind]int{opMatMul: 2, opAdd: 2, opSub: 2, opMul: 2, opRelu: 1, opTranspose: 1, opSoftmax: 1}

var opKinds = map[string]opKind{"MatMul": opMatMul, "Add": opAdd, "Sub": opSub, "Mul": opMul, "Relu": opRelu,
	"Transpose": opTranspose, "Concat": opConcat, "Softmax": opSoftmax}

// compile checks that every node of g is one the builtin runtime runs and
// infers every value's shape from the inputs and initializers.
func compile(g *onnxpb.GraphProto) (*program, error) {
	p := &program{}
	ids := map[string]int{}
	add := func(name string, shape [2]int, data []float32) int {
		ids[name] = len(p.shapes)
		p.shapes = append(p.shapes, shape)
		p.consts = append(p.consts, data)
		return ids[name]
	}
	shape2 := func(dims []int64) ([2]int, bool) {
		switch len(dims) {
		case 1:
			return [2]int{1, int(dims[0])}, true
		case 2:
			return [2]int{int(dims[0]), int(dims[1])}, true
		}
		return [2]int{}, false
	}
	for _, t := range g.Initializer {
		s, ok := shape2(t.Dims)
		if !ok || t.GetDataType() != int32(onnxpb.TensorProto_FLOAT) || len(t.FloatData) != s[0]*s[1] {
			return nil, fmt.Errorf("initializer %s: the builtin runtime reads 1-D and 2-D float tensors in float_data", t.GetName())
		}
		add(t.GetName(), s, t.FloatData)
	}
	for _, vi := range g.Input {
		if _, ok := ids[vi.GetName()]; ok {
			continue // an initializer listed as an input
		}
		var dims []int64
		for _, d := range vi.GetType().GetTensorType().GetShape().GetDim() {
			dims = append(dims, d.GetDimValue())
		}
		s, ok := shape2(dims)
		if !ok {
			return nil, fmt.Errorf("input %s: the builtin runtime takes 1-D and 2-D inputs", vi.GetName())
		}
		p.inputs = append(p.inputs, add(vi.GetName(), s, nil))
	}
	for _, n := range g.Node {
		kind, ok := opKinds[n.GetOpType()]
		if !ok {
			return nil, fmt.Errorf("node %s: operator %s is not one the builtin runtime runs (try the onnx-go runtime)", n.GetName(), n.GetOpType())
		}
		st := step{op: kind}
		var in [][2]int
		for _, name := range n.Input {
			id, ok := ids[name]
			if !ok {
				return nil, fmt.Errorf("node %q: input %q is not defined before it", n.GetName(), name)
			}
			st.in = append(st.in, id)
			in = append(in, p.shapes[id])
		}
		attr := func(name string) (int64, []int64, bool) {
			for _, a := range n.Attribute {
				if a.GetName() == name {
					return a.GetI(), a.Ints, true
				}
			}
			return 0, nil, false
		}
		if want, ok := opArity[kind]; ok && len(in) != want {
			return nil, fmt.Errorf("node %s: %s with %d inputs, expected %d", n.GetName(), n.GetOpType(), len(in), want)
		}
		var out [2]int
		switch kind {
		case opMatMul:
			if in[0][1] != in[1][0] {
				return nil, fmt.Errorf("node %s: MatMul of %v and %v", n.GetName(), in[0], in[1])
			}
			out = [2]int{in[0][0], in[1][1]}
		case opAdd, opSub, opMul:
			switch {
			case in[0] == in[1]:
			case in[1][0] == 1 && in[1][1] == in[0][1]:
				st.rowWise = true
			default:
				return nil, fmt.Errorf("node %s: %s of %v and %v: the builtin runtime broadcasts only a row", n.GetName(), n.GetOpType(), in[0], in[1])
			}
			out = in[0]
		case opRelu:
			out = in[0]
		case opTranspose:
			if _, perm, ok := attr("perm"); ok && !slices.Equal(perm, []int64{1, 0}) {
				return nil, fmt.Errorf("node %s: Transpose with perm %v, expected [1 0]", n.GetName(), perm)
			}
			out = [2]int{in[0][1], in[0][0]}
		case opConcat:
			if axis, _, ok := attr("axis"); !ok || axis != 1 {
				return nil, fmt.Errorf("node %s: the builtin runtime concatenates along axis 1 only", n.GetName())
			}
			if len(in) == 0 {
				return nil, fmt.Errorf("node %s: Concat of nothing", n.GetName())
			}
			out = [2]int{in[0][0], 0}
			for _, s := range in {
				if s[0] != out[0] {
					return nil, fmt.Errorf("node %s: Concat of %d and %d rows", n.GetName(), out[0], s[0])
				}
				out[1] += s[1]
			}
		case opSoftmax:
			if axis, _, ok := attr("axis"); ok && axis != 1 && axis != -1 {
				return nil, fmt.Errorf("node %s: the builtin runtime takes Softmax along axis 1 only", n.GetName())
			}
			out = in[0]
		}
		if len(n.Output) != 1 {
			return nil, fmt.Errorf("node %s: %d outputs, expected 1", n.GetName(), len(n.Output))
		}
		st.out = add(n.Output[0], out, nil)
		p.steps = append(p.steps, st)
	}
	for _, vi := range g.Output {
		id, ok := ids[vi.GetName()]
		if !ok {
			return nil, fmt.Errorf("output %s is not computed by the graph", vi.GetName())
		}
		p.outputs = append(p.outputs, id)
	}
	p.assignSlots()
	p.findNeeds()
	return p, nil
}

// machine is one instance of a program: a buffer per value. It is used
// by one goroutine at a time.
type machine struct {
	p    *program
	vals [][]float32
	// b and c of a product whose n is below 8, widened to eight columns:
	// the vector loops take eight columns at a time.
	bWide, cWide []float32
}

// newMachine makes a machine for p. Its buffers come from package warm
// where it can lend them: made fresh, they were only mapped on the
// machine's first run, a page fault per 4 KiB, and on the VMs this
// project is measured on a fault costs 14-20 µs, about 0.05 ms of a fresh
// process's first decision by the network (docs/model.md, "A decision's
// scratch from the text it read"). sparsetune predict loads the model
// after it reads the tensor, whose reader gave the pool its text.
func (p *program) newMachine() *machine {
	m := &machine{p: p, vals: make([][]float32, len(p.shapes))}
	bWide, cWide := 0, 0
	for _, st := range p.steps {
		if st.op == opMatMul {
			a, b := p.shapes[st.in[0]], p.shapes[st.in[1]]
			if w := wide(b[1]); w != b[1] {
				bWide, cWide = max(bWide, b[0]*w), max(cWide, a[0]*w)
			}
		}
	}
	m.bWide, m.cWide = warm.Float32s(bWide), warm.Float32s(cWide)
	for i, s := range p.shapes {
		switch {
		case p.consts[i] != nil:
			m.vals[i] = p.consts[i]
		case p.slot[i] < 0:
			m.vals[i] = warm.Float32s(s[0] * s[1])
		}
	}
	// The intermediate values share their slots' buffers.
	slots := make([][]float32, len(p.slotSize))
	for k, n := range p.slotSize {
		slots[k] = warm.Float32s(n)
	}
	for i, k := range p.slot {
		if k >= 0 {
			n := p.shapes[i][0] * p.shapes[i][1]
			m.vals[i] = slots[k][:n:n]
		}
	}
	// Fresh memory is not written by its allocation: each page would
	// fault at the first run's first write, on a decision's time (five
	// faults in the network's first run, on a tensor read from a .stb
	// file, which leaves warm nothing to lend). Written now, once.
	clear(m.bWide)
	clear(m.cWide)
	for i, v := range m.vals {
		if p.consts[i] == nil && p.slot[i] < 0 {
			clear(v)
		}
	}
	for _, v := range slots {
		clear(v)
	}
	return m
}

// findNeeds sets needs: the steps each output depends on, walking back
// from it.
func (p *program) findNeeds() {
	producer := make([]int, len(p.shapes))
	for i := range producer {
		producer[i] = -1
	}
	for i, st := range p.steps {
		producer[st.out] = i
	}
	p.needs = make([][]bool, len(p.outputs))
	for k, id := range p.outputs {
		need := make([]bool, len(p.steps))
		stack := []int{id}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if i := producer[v]; i >= 0 && !need[i] {
				need[i] = true
				stack = append(stack, p.steps[i].in...)
			}
		}
		p.needs[k] = need
	}
}

// assignSlots gives every intermediate value (computed by a step, not an
// output) a slot whose buffer it shares with values that are dead before
// it is computed: the network's 80-odd values then live in a few buffers.
// Why it matters: a prediction in a fresh process faults in every page
// its instance touches (about 2 µs each on a small VM), and one buffer per
// value was 300 KB.
func (p *program) assignSlots() {
	p.slot = make([]int, len(p.shapes))
	last := make([]int, len(p.shapes)) // the last step reading each value, or -1
	for i := range p.slot {
		p.slot[i], last[i] = -1, -1
	}
	for i, st := range p.steps {
		for _, id := range st.in {
			last[id] = i
		}
	}
	kept := map[int]bool{}
	for _, id := range p.outputs {
		kept[id] = true
	}
	var free []int // slots whose values are dead
	for i, st := range p.steps {
		if !kept[st.out] {
			need := p.shapes[st.out][0] * p.shapes[st.out][1]
			// The smallest free slot that holds the value, else a new one.
			best := -1
			for j, k := range free {
				if p.slotSize[k] >= need && (best < 0 || p.slotSize[k] < p.slotSize[free[best]]) {
					best = j
				}
			}
			if best >= 0 {
				p.slot[st.out] = free[best]
				free = slices.Delete(free, best, best+1)
			} else {
				p.slot[st.out] = len(p.slotSize)
				p.slotSize = append(p.slotSize, need)
			}
		}
		// Operands read for the last time free their slots only after
		// the step: a step never writes over its own operands.
		for j, id := range st.in {
			if k := p.slot[id]; k >= 0 && last[id] == i && !slices.Contains(st.in[:j], id) {
				free = append(free, k)
			}
		}
		if k := p.slot[st.out]; k >= 0 && last[st.out] < 0 {
			free = append(free, k) // never read
		}
	}
}

// run executes the program on the inputs already copied into their
// buffers: every step when output is -1, else only the steps that output
// (an index into the program's outputs) depends on.
func (m *machine) run(output int) {
	for i, st := range m.p.steps {
		if output >= 0 && !m.p.needs[output][i] {
			continue
		}
		out := m.vals[st.out]
		switch st.op {
		case opMatMul:
			a, b := m.p.shapes[st.in[0]], m.p.shapes[st.in[1]]
			m.matMul(out, m.vals[st.in[0]], m.vals[st.in[1]], a[0], a[1], b[1])
		case opAdd, opSub, opMul:
			x, y := m.vals[st.in[0]], m.vals[st.in[1]]
			if !st.rowWise {
				// Same shapes: one loop over the whole matrix.
				elementwise(st.op, out, x, y)
				continue
			}
			// y is one row, applied to every row of x.
			cols := m.p.shapes[st.out][1]
			for i := 0; i < len(out); i += cols {
				elementwise(st.op, out[i:i+cols], x[i:i+cols], y)
			}
		case opRelu:
			kernels.Relu(out, m.vals[st.in[0]])
		case opTranspose:
			s := m.p.shapes[st.in[0]]
			transpose(out, m.vals[st.in[0]], s[0], s[1])
		case opConcat:
			rows, cols := m.p.shapes[st.out][0], m.p.shapes[st.out][1]
			off := 0
			for _, id := range st.in {
				w := m.p.shapes[id][1]
				x := m.vals[id]
				for r := range rows {
					copy(out[r*cols+off:r*cols+off+w], x[r*w:(r+1)*w])
				}
				off += w
			}
		case opSoftmax:
			cols := m.p.shapes[st.out][1]
			x := m.vals[st.in[0]]
			for i := 0; i < len(out); i += cols {
				xr, or := x[i:i+cols], out[i:i+cols]
				mx := float32(math.Inf(-1))
				for _, v := range xr {
					mx = max(mx, v)
				}
				var sum float64
				for j, v := range xr {
					e := float32(math.Exp(float64(v - mx)))
					or[j] = e
					sum += float64(e)
				}
				for j := range or {
					or[j] = float32(float64(or[j]) / sum)
				}
			}
		}
	}
}

// elementwise sets out to x op y, entry by entry (op is Add, Sub or Mul;
// x and y hold at least out's length), on the vector units.
func elementwise(op opKind, out, x, y []float32) {
	switch op {
	case opAdd:
		kernels.Add(out, x, y)
	case opSub:
		kernels.Sub(out, x, y)
	default:
		kernels.Mul(out, x, y)
	}
}

// matMul sets c (r x n) = a (r x k) · b (k x n), row-major, by
// kernels.MatMul, whose vector loops keep several rows of c in registers.
// At the network's sizes (32 × 32 × 16) that is three times faster than
// the sparse product this runtime used before, which skipped a's zeros
// (ReLU outputs, a graph's missing edges) but waited on each row's chain
// of multiply-adds, and ten times faster than gonum's float32 GEMM, which
// spends more on blocking and dispatch than on the product
// (BenchmarkMatMul).
func (m *machine) matMul(c, a, b []float32, r, k, n int) {
	if w := wide(n); w != n && r > 1 {
		// A narrow b (a layer's five node features) is widened to eight
		// columns for a product of many rows: the vector loop on the
		// widened operands costs less than the scalar one on the narrow
		// (BenchmarkMatMul, 32x32x5). Columns past n may hold an earlier
		// product's values; c's columns past n, which they make, are
		// dropped.
		bw, cw := m.bWide[:k*w], m.cWide[:r*w]
		for p := range k {
			copy(bw[p*w:p*w+n], b[p*n:(p+1)*n])
		}
		kernels.MatMul(cw, a, bw, r, k, w)
		for i := range r {
			copy(c[i*n:(i+1)*n], cw[i*w:i*w+n])
		}
		return
	}
	kernels.MatMul(c, a, b, r, k, n)
}

// transpose sets out (c × r) to the transpose of x (r × c), eight rows of
// x at a time: each row of out then gets eight consecutive values per
// pass, which took a third of the time of one value per row for the
// network's 32 × 32 adjacency.
func transpose(out, x []float32, r, c int) {
	out, x = out[:r*c], x[:r*c]
	i := 0
	for ; i+8 <= r; i += 8 {
		x0 := x[i*c : (i+1)*c]
		x1, x2, x3 := x[(i+1)*c:(i+2)*c], x[(i+2)*c:(i+3)*c], x[(i+3)*c:(i+4)*c]
		x4, x5, x6, x7 := x[(i+4)*c:(i+5)*c], x[(i+5)*c:(i+6)*c], x[(i+6)*c:(i+7)*c], x[(i+7)*c:(i+8)*c]
		x1, x2, x3, x4, x5, x6, x7 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)], x4[:len(x0)], x5[:len(x0)], x6[:len(x0)], x7[:len(x0)]
		for j := range x0 {
			o := (*[8]float32)(out[j*r+i:])
			o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7] = x0[j], x1[j], x2[j], x3[j], x4[j], x5[j], x6[j], x7[j]
		}
	}
	for ; i < r; i++ {
		for j, v := range x[i*c : (i+1)*c] {
			out[j*r+i] = v
		}
	}
}

// wide returns n rounded up to a multiple of 8 when n is below 8 (the
// only narrow products of the network), else n.
func wide(n int) int {
	if n < 8 {
		return 8
	}
	return n
}

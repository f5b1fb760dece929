// Command asmgen writes the amd64 assembly of package kernels' vector inner
// loops (kernels/vec_amd64.s) and their Go declarations
// (kernels/vec_stubs_amd64.go), using avo. It is its own module so that
// avo is a dependency of the generator, not of sparsetune. Run it through
// go generate in package kernels:
//
//	go generate ./kernels
//
// Every loop runs over a whole row range, run sequence, fiber tree or
// chunk of nonzeros per call: a call per nonzero would cost more than the
// multiply-adds it saves. A rank block of nvec vector registers (8 float32
// lanes with AVX2, 16 with AVX-512) is kept in registers while the
// nonzeros that feed it stream past; one function is generated per
// (loop, instruction set, nvec), and kernels picks one at run time.
//
// Conventions shared by every loop (the Go side guarantees them):
//   - u/dst/out/factor base pointers already point at column r0 of row 0;
//   - stride is the row length R in float32 elements;
//   - indices are in range (plans validate them when built) and
//     r0 + nvec·lanes <= R, so every vector load and store is inside a row.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// isa is a vector instruction set: its name in function names, its lanes
// per register, how many vector registers it has and how to allocate one.
type isa struct {
	name  string
	lanes int
	regs  int
	vec   func() VecVirtual
	nvecs []int // the register counts generated
}

var isas = []isa{
	{name: "AVX2", lanes: 8, regs: 16, vec: YMM, nvecs: []int{1, 2, 4}},
	{name: "AVX512", lanes: 16, regs: 32, vec: ZMM, nvecs: []int{1, 2, 4}},
}

func main() {
	ConstraintExpr("amd64,!purego")
	laneIndexData()
	for _, b := range spttmBlocks() {
		spttmCSR(b)
		spttmCOO(b)
		ellSlots(b)
	}
	for _, s := range isas {
		for _, nv := range s.nvecs {
			for _, order := range []int{1, 2, 0} {
				mttkrpRuns(s, nv, order)
				mttkrpScatter(s, nv, order)
			}
			csf3(s, nv)
			csf4(s, nv)
			for _, order := range []int{3, 4} {
				altoScatter(s, nv, order, false)
				altoScatter(s, nv, order, true)
			}
			altoRuns3(s, nv)
			hicooScatter3(s, nv)
			hicooScatter4(s, nv)
		}
	}
	for _, s := range isas {
		addTo(s)
		for _, op := range []string{"add", "sub", "mul", "relu"} {
			elementwise(s, op)
		}
		for _, rows := range []int{1, 4, 8} {
			for _, nv := range []int{1, 2, 4} {
				if rows*nv+nv+1 > s.regs || 4*nv+nv+1 > s.regs {
					// More registers than the unit has, or a width
					// kernels' matMulVec does not take: it takes one
					// only with a loop of four rows for it.
					continue
				}
				gemmBlock(s, rows, nv)
			}
		}
	}
	pextDecode()
	cpuid()
	Generate()
}

// fn names one generated function.
func fn(kernel string, s isa, nv int) string { return fmt.Sprintf("%s%sx%d", kernel, s.name, nv) }

// laneIndex holds the lane numbers 0-7, against which a tail's lane
// count is compared to make its mask.
var laneIndex Mem

func laneIndexData() {
	laneIndex = GLOBL("laneindex", RODATA|NOPTR)
	for i := range 8 {
		DATA(4*i, U32(i))
	}
}

// rowBlock is the registers of an SpTTM loop's rank block: nz vectors of
// its instruction set, then ny AVX2 (8-lane) vectors, the last of which
// is masked when tail is set: only its first tail lanes (the tail
// argument, 1 to 8) are loaded or stored, with VMASKMOVPS, which neither
// reads nor writes the others (faults included). So a block can end
// inside a vector without reading or writing past the end of a row, in
// one pass over the entries.
//
// The tail is AVX2 on AVX-512 too, measured: on a Zen 5 host a 16-lane
// vector masked with an opmask register ran ranks 4, 12, 20 and 33
// slower than whole 16-lane vectors followed by 8-lane ones with
// VMASKMOVPS, at every point measured (up to 1.5 times the time;
// docs/performance.md, "Masked tails").
type rowBlock struct {
	s      isa
	nz, ny int
	tail   bool
}

// spttmBlocks lists the blocks generated: per instruction set, 1-4 whole
// vectors, and 1-4 AVX2 vectors with the last masked; AVX-512 adds 1-3
// whole vectors followed by one whole AVX2 vector, or by one or two
// whose last is masked.
func spttmBlocks() []rowBlock {
	var bs []rowBlock
	for _, s := range isas {
		for nv := 1; nv <= 4; nv++ {
			bs = append(bs, rowBlock{s: s, nz: nv})
			if s.lanes == 8 {
				bs = append(bs, rowBlock{s: s, nz: nv, tail: true})
			}
		}
		if s.lanes == 16 {
			for nz := 1; nz <= 3; nz++ {
				bs = append(bs, rowBlock{s: s, nz: nz, ny: 1}, rowBlock{s: s, nz: nz, ny: 1, tail: true}, rowBlock{s: s, nz: nz, ny: 2, tail: true})
			}
		}
	}
	return bs
}

// name names the loop: kernel, instruction set and vector count, "Y" and
// the AVX2 vectors that follow, and "Tail" when the last is masked:
// csrAVX512x2, csrAVX512x1Y2Tail, csrAVX2x3Tail.
func (b rowBlock) name(kernel string) string {
	n := fn(kernel, b.s, b.nz)
	if b.ny > 0 {
		n += fmt.Sprintf("Y%d", b.ny)
	}
	if b.tail {
		n += "Tail"
	}
	return n
}

// signature appends the tail argument to sig where the block has one.
func (b rowBlock) signature(sig string) string {
	if !b.tail {
		return sig
	}
	return sig[:len(sig)-1] + ", tail int)"
}

// columns says which columns the block holds, for the loop's comment.
func (b rowBlock) columns() string {
	whole := b.nz*b.s.lanes + 8*b.ny
	if !b.tail {
		return fmt.Sprintf("%d columns", whole)
	}
	return fmt.Sprintf("%d columns and the first tail of the next 8", whole-8)
}

// vec is one register of a block and the byte offset of its columns.
type vec struct {
	r      VecVirtual
	disp   int
	masked bool
}

// regs allocates the block's registers.
func (b rowBlock) regs() []vec {
	var v []vec
	for q := range b.nz {
		v = append(v, vec{r: b.s.vec(), disp: 4 * b.s.lanes * q})
	}
	for j := range b.ny {
		v = append(v, vec{r: YMM(), disp: 4 * (b.s.lanes*b.nz + 8*j)})
	}
	if b.tail {
		v[len(v)-1].masked = true
	}
	return v
}

// bcast is an entry's value broadcast to the block's widths: an AVX2
// vector is given its own register rather than the low half of the
// AVX-512 one, which may be one VEX encodings cannot name.
type bcast struct{ wide, narrow VecVirtual }

func (b rowBlock) bcast() bcast {
	c := bcast{wide: b.s.vec()}
	if b.ny > 0 && b.s.lanes == 16 {
		c.narrow = YMM()
	}
	return c
}

func (c bcast) load(m Mem) {
	VBROADCASTSS(m, c.wide)
	if c.narrow != nil {
		VBROADCASTSS(m, c.narrow)
	}
}

func (c bcast) of(v vec) VecVirtual {
	if c.narrow != nil && v.r.Size() == 32 {
		return c.narrow
	}
	return c.wide
}

// tailMask holds the lane mask of a masked block and the target of its
// masked loads.
type tailMask struct{ m, tmp VecVirtual }

func (b rowBlock) loadTailMask() tailMask {
	if !b.tail {
		return tailMask{}
	}
	n := GP64()
	Load(Param("tail"), n)
	x := XMM()
	VMOVD(n.As32(), x)
	t := tailMask{m: YMM(), tmp: YMM()}
	VPBROADCASTD(x, t.m)
	VPCMPGTD(laneIndex, t.m, t.m)
	return t
}

// operand returns mem as the source operand of an instruction on v:
// mem itself, or, where v is masked, tmp loaded from it under the mask
// (the masked-off lanes zero), since only VMASKMOVPS may touch them.
func (t tailMask) operand(mem Mem, v vec) Op {
	if !v.masked {
		return mem
	}
	VMASKMOVPS(mem, t.m, t.tmp)
	return t.tmp
}

// fma emits v += mem·c.
func (t tailMask) fma(mem Mem, c VecVirtual, v vec) {
	VFMADD231PS(t.operand(mem, v), c, v.r)
}

// add emits v += mem.
func (t tailMask) add(mem Mem, v vec) {
	VADDPS(t.operand(mem, v), v.r, v.r)
}

// load emits v = mem, the masked-off lanes zero.
func (t tailMask) load(mem Mem, v vec) {
	if !v.masked {
		VMOVUPS(mem, v.r)
		return
	}
	VMASKMOVPS(mem, t.m, v.r)
}

// store emits mem = v.
func (t tailMask) store(v vec, mem Mem) {
	if !v.masked {
		VMOVUPS(v.r, mem)
		return
	}
	VMASKMOVPS(v.r, t.m, mem)
}

// text starts a function whose pointer arguments do not escape.
func text(name, signature string) {
	TEXT(name, NOSPLIT, signature)
	Pragma("noescape")
}

// vecs allocates n vector registers.
func vecs(s isa, n int) []VecVirtual {
	v := make([]VecVirtual, n)
	for i := range v {
		v[i] = s.vec()
	}
	return v
}

// paramAddr is the stack address of an argument, for instructions that
// read it in place rather than from a register.
func paramAddr(c gotypes.Component) Mem {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

func zero(acc []VecVirtual) {
	for _, a := range acc {
		VXORPS(a, a, a)
	}
}

// rowMem returns the q-th vector of the row at base + off (off in bytes,
// a register).
func rowMem(s isa, base, off Register, q int) Mem {
	return Mem{Base: base, Index: off, Scale: 1, Disp: 4 * s.lanes * q}
}

// loadU32 loads the uint32 at base[idx] zero-extended into a new 64-bit
// register.
func loadU32(base, idx Register) GPVirtual {
	r := GP64()
	MOVL(Mem{Base: base, Index: idx, Scale: 4}, r.As32())
	return r
}

// rowOffset loads the uint32 index at base[idx] and scales it to the byte
// offset of its row (index·stride·4, strideBytes holding stride·4).
func rowOffset(base, idx, strideBytes Register) GPVirtual {
	r := loadU32(base, idx)
	IMULQ(strideBytes, r)
	return r
}

// addScaledRow emits acc += vals[k]·A row idx[k] (v is scratch for the
// broadcast value): the inner step of every loop that sums one sparse row
// or fiber against a dense matrix.
func addScaledRow(s isa, idx, valp, a, k, sb Register, v VecVirtual, acc []VecVirtual) {
	c := rowOffset(idx, k, sb)
	VBROADCASTSS(Mem{Base: valp, Index: k, Scale: 4}, v)
	for q := range acc {
		VFMADD231PS(rowMem(s, a, c, q), v, acc[q])
	}
}

// addScaledRowBlock is addScaledRow for a rowBlock's registers.
func addScaledRowBlock(idx, valp, a, k, sb Register, v bcast, acc []vec, tm tailMask) {
	c := rowOffset(idx, k, sb)
	v.load(Mem{Base: valp, Index: k, Scale: 4})
	for _, r := range acc {
		tm.fma(Mem{Base: a, Index: c, Scale: 1, Disp: r.disp}, v.of(r), r)
	}
}

func zeroBlock(acc []vec) {
	for _, a := range acc {
		VXORPS(a.r, a.r, a.r)
	}
}

func strideBytes() Register {
	sb := Load(Param("stride"), GP64())
	SHLQ(U8(2), sb)
	return sb
}

// spttmCSR: out row i = Σ_{e in [ptr[i], ptr[i+1])} vals[e]·u row col[e],
// for the len(ptr)-1 rows of a CSR row range. out and u point at column r0.
func spttmCSR(b rowBlock) {
	name := b.name("csr")
	text(name, b.signature("func(out []float32, ptr, col []uint32, vals, u []float32, stride int)"))
	Doc(fmt.Sprintf("%s sets %s of each row of a CSR row range (see asmgen).", name, b.columns()))
	outp := Load(Param("out").Base(), GP64())
	ptrp := Load(Param("ptr").Base(), GP64())
	colp := Load(Param("col").Base(), GP64())
	valp := Load(Param("vals").Base(), GP64())
	up := Load(Param("u").Base(), GP64())
	rows := Load(Param("ptr").Len(), GP64())
	sb := strideBytes()
	DECQ(rows)
	JLE(LabelRef("done"))
	e := GP64()
	MOVL(Mem{Base: ptrp}, e.As32())
	acc := b.regs()
	v := b.bcast()
	tm := b.loadTailMask()

	Label("row")
	hi := GP64()
	MOVL(Mem{Base: ptrp, Disp: 4}, hi.As32())
	zeroBlock(acc)
	CMPQ(e, hi)
	JAE(LabelRef("store"))
	Label("entry")
	addScaledRowBlock(colp, valp, up, e, sb, v, acc, tm)
	INCQ(e)
	CMPQ(e, hi)
	JB(LabelRef("entry"))
	Label("store")
	for _, a := range acc {
		tm.store(a, Mem{Base: outp, Disp: a.disp})
	}
	ADDQ(sb, outp)
	ADDQ(U8(4), ptrp)
	DECQ(rows)
	JNZ(LabelRef("row"))
	Label("done")
	VZEROUPPER()
	RET()
}

// spttmCOO: for each run of equal rows[k], out row rows[k] = (or +=, when
// add != 0) Σ_run vals[k]·u row col[k]. rows, col and vals have one length.
func spttmCOO(b rowBlock) {
	name := b.name("cooRuns")
	text(name, b.signature("func(out []float32, rows, col []uint32, vals, u []float32, stride int, add bool)"))
	Doc(fmt.Sprintf("%s sets or adds %s of each run of a row-ordered FiberCOO (see asmgen).", name, b.columns()))
	outp := Load(Param("out").Base(), GP64())
	rowp := Load(Param("rows").Base(), GP64())
	colp := Load(Param("col").Base(), GP64())
	valp := Load(Param("vals").Base(), GP64())
	up := Load(Param("u").Base(), GP64())
	n := Load(Param("rows").Len(), GP64())
	sb := strideBytes()
	k := GP64()
	XORQ(k, k)
	CMPQ(n, U8(0))
	JE(LabelRef("done"))
	acc := b.regs()
	v := b.bcast()
	tm := b.loadTailMask()

	Label("run")
	row := loadU32(rowp, k)
	zeroBlock(acc)
	Label("entry")
	addScaledRowBlock(colp, valp, up, k, sb, v, acc, tm)
	INCQ(k)
	CMPQ(k, n)
	JAE(LabelRef("flush"))
	next := GP64()
	MOVL(Mem{Base: rowp, Index: k, Scale: 4}, next.As32())
	CMPQ(next, row)
	JE(LabelRef("entry"))
	Label("flush")
	IMULQ(sb, row)
	dst := Mem{Base: outp, Index: row, Scale: 1}
	addFlag := Load(Param("add"), GP8())
	TESTB(addFlag, addFlag)
	JZ(LabelRef("store"))
	for _, a := range acc {
		tm.add(dst.Offset(a.disp), a)
	}
	Label("store")
	for _, a := range acc {
		tm.store(a, dst.Offset(a.disp))
	}
	CMPQ(k, n)
	JB(LabelRef("run"))
	Label("done")
	VZEROUPPER()
	RET()
}

// ellSlots: out row j += vals[j]·u row col[j] for each slot j of one ELL
// slot column over consecutive rows.
func ellSlots(b rowBlock) {
	name := b.name("ellSlots")
	text(name, b.signature("func(out []float32, col []uint32, vals, u []float32, stride int)"))
	Doc(fmt.Sprintf("%s adds %s of one ELL slot column into consecutive rows (see asmgen).", name, b.columns()))
	outp := Load(Param("out").Base(), GP64())
	colp := Load(Param("col").Base(), GP64())
	valp := Load(Param("vals").Base(), GP64())
	up := Load(Param("u").Base(), GP64())
	n := Load(Param("col").Len(), GP64())
	sb := strideBytes()
	k := GP64()
	XORQ(k, k)
	CMPQ(n, U8(0))
	JE(LabelRef("done"))
	v := b.bcast()
	t := b.regs()
	tm := b.loadTailMask()
	Label("slot")
	c := rowOffset(colp, k, sb)
	v.load(Mem{Base: valp, Index: k, Scale: 4})
	for _, r := range t {
		d := Mem{Base: outp, Disp: r.disp}
		tm.load(d, r)
		tm.fma(Mem{Base: up, Index: c, Scale: 1, Disp: r.disp}, v.of(r), r)
		tm.store(r, d)
	}
	ADDQ(sb, outp)
	INCQ(k)
	CMPQ(k, n)
	JB(LabelRef("slot"))
	Label("done")
	VZEROUPPER()
	RET()
}

// otherFactors holds the arrays of the other modes of an MTTKRP chunk: the
// inds and facs pointer arrays and, when there are one or two other modes
// (orders 2 and 3), those modes' index arrays and factor bases in
// registers.
type otherFactors struct {
	indsp, facsp   Register
	i0, f0, i1, f1 GPVirtual
	others         int // 1 or 2 in registers; 0: any count, read per nonzero
}

func loadOtherFactors(others int, indsp, facsp Register) otherFactors {
	o := otherFactors{indsp: indsp, facsp: facsp, others: others}
	if others == 1 || others == 2 {
		o.i0, o.f0 = GP64(), GP64()
		MOVQ(Mem{Base: indsp}, o.i0)
		MOVQ(Mem{Base: facsp}, o.f0)
	}
	if others == 2 {
		o.i1, o.f1 = GP64(), GP64()
		MOVQ(Mem{Base: indsp, Disp: 8}, o.i1)
		MOVQ(Mem{Base: facsp, Disp: 8}, o.f1)
	}
	return o
}

// addTerm emits into += v·Π_j A_j row inds[j][k] for nonzero k (v holds
// its broadcast value; t is scratch); the last product is a fused
// multiply-add into into.
func (o otherFactors) addTerm(s isa, k, sb Register, v VecVirtual, t, into []VecVirtual) {
	switch o.others {
	case 1: // into += v·A0
		a := rowOffset(o.i0, k, sb)
		for q := range into {
			VFMADD231PS(rowMem(s, o.f0, a, q), v, into[q])
		}
	case 2: // into += (v·A0)·A1
		a := rowOffset(o.i0, k, sb)
		for q := range t {
			VMULPS(rowMem(s, o.f0, a, q), v, t[q])
		}
		b := rowOffset(o.i1, k, sb)
		for q := range into {
			VFMADD231PS(rowMem(s, o.f1, b, q), t[q], into[q])
		}
	default: // t = v·A0, t *= A_j for the middle factors, into += t·A_last
		ia, fa := GP64(), GP64()
		MOVQ(Mem{Base: o.indsp}, ia)
		MOVQ(Mem{Base: o.facsp}, fa)
		a := rowOffset(ia, k, sb)
		for q := range t {
			VMULPS(rowMem(s, fa, a, q), v, t[q])
		}
		j, last := GP64(), GP64()
		MOVQ(U32(1), j)
		Load(Param("others"), last)
		DECQ(last)
		Label("middle")
		CMPQ(j, last)
		JAE(LabelRef("lastfac"))
		ij, fj := GP64(), GP64()
		MOVQ(Mem{Base: o.indsp, Index: j, Scale: 8}, ij)
		MOVQ(Mem{Base: o.facsp, Index: j, Scale: 8}, fj)
		b := rowOffset(ij, k, sb)
		for q := range t {
			VMULPS(rowMem(s, fj, b, q), t[q], t[q])
		}
		INCQ(j)
		JMP(LabelRef("middle"))
		Label("lastfac")
		il, fl := GP64(), GP64()
		MOVQ(Mem{Base: o.indsp, Index: last, Scale: 8}, il)
		MOVQ(Mem{Base: o.facsp, Index: last, Scale: 8}, fl)
		c := rowOffset(il, k, sb)
		for q := range into {
			VFMADD231PS(rowMem(s, fl, c, q), t[q], into[q])
		}
	}
}

// mttkrpRuns: for the n nonzeros of a chunk, each run of equal output index
// out[k] sums vals[k]·Π_j facs[j] row inds[j][k] in registers and adds the
// sum into dst row out[k]-rowBase. inds and facs hold the other modes'
// index arrays and (column-r0) factor bases. One function is generated per
// count of other modes: 1 (order 2), 2 (order 3), and any (others > 2,
// whose arrays are read from inds and facs per nonzero).
func mttkrpRuns(s isa, nv int, order int) {
	name := fmt.Sprintf("mttkrpRuns%d", order)
	if order == 0 {
		name = "mttkrpRunsN"
	}
	text(fn(name, s, nv), "func(dst []float32, out *uint32, vals []float32, inds *[7]*uint32, facs *[7]*float32, rowBase, stride, others int)")
	Doc(fmt.Sprintf("%s%sx%d adds %d columns of a chunk's MTTKRP into its output rows, one store per run (see asmgen).", name, s.name, nv, nv*s.lanes))
	outp := Load(Param("out"), GP64())
	valp := Load(Param("vals").Base(), GP64())
	n := Load(Param("vals").Len(), GP64())
	indsp := Load(Param("inds"), GP64())
	facsp := Load(Param("facs"), GP64())
	sb := strideBytes()
	k := GP64()
	XORQ(k, k)
	CMPQ(n, U8(0))
	JE(LabelRef("done"))
	acc := vecs(s, nv)
	t := vecs(s, nv)
	v := s.vec()

	// Orders 2 and 3 keep their factors' arrays in registers.
	o := loadOtherFactors(order, indsp, facsp)

	Label("run")
	row := loadU32(outp, k)
	zero(acc)
	Label("nnz")
	VBROADCASTSS(Mem{Base: valp, Index: k, Scale: 4}, v)
	o.addTerm(s, k, sb, v, t, acc)
	INCQ(k)
	CMPQ(k, n)
	JAE(LabelRef("flush"))
	nx := GP64()
	MOVL(Mem{Base: outp, Index: k, Scale: 4}, nx.As32())
	CMPQ(nx, row)
	JE(LabelRef("nnz"))
	Label("flush")
	rb := Load(Param("rowBase"), GP64())
	SUBQ(rb, row)
	IMULQ(sb, row)
	dstp := Load(Param("dst").Base(), GP64())
	dst := Mem{Base: dstp, Index: row, Scale: 1}
	for q := range acc {
		VADDPS(dst.Offset(4*s.lanes*q), acc[q], acc[q])
		VMOVUPS(acc[q], dst.Offset(4*s.lanes*q))
	}
	CMPQ(k, n)
	JB(LabelRef("run"))
	Label("done")
	VZEROUPPER()
	RET()
}

// mttkrpScatter is mttkrpRuns without the runs: every nonzero's product
// is added straight into its output row. Where consecutive nonzeros
// seldom share an output index (ALTO and HiCOO order on most modes) a run
// is one nonzero, and testing for runs costs a mispredicted branch per
// nonzero without saving a store.
func mttkrpScatter(s isa, nv int, order int) {
	name := fmt.Sprintf("mttkrpScatter%d", order)
	if order == 0 {
		name = "mttkrpScatterN"
	}
	text(fn(name, s, nv), "func(dst []float32, out *uint32, vals []float32, inds *[7]*uint32, facs *[7]*float32, rowBase, stride, others int)")
	Doc(fmt.Sprintf("%s%sx%d adds %d columns of each nonzero's MTTKRP term into its output row (see asmgen).", name, s.name, nv, nv*s.lanes))
	outp := Load(Param("out"), GP64())
	valp := Load(Param("vals").Base(), GP64())
	n := Load(Param("vals").Len(), GP64())
	indsp := Load(Param("inds"), GP64())
	facsp := Load(Param("facs"), GP64())
	sb := strideBytes()
	// dst0 is the address of output row 0 (dst holds rows from rowBase
	// on); it is only ever offset by an index of a row in dst.
	dst0 := Load(Param("rowBase"), GP64())
	IMULQ(sb, dst0)
	NEGQ(dst0)
	ADDQ(paramAddr(Param("dst").Base()), dst0)
	k := GP64()
	XORQ(k, k)
	CMPQ(n, U8(0))
	JE(LabelRef("done"))
	t := vecs(s, nv)
	d := vecs(s, nv)
	v := s.vec()
	o := loadOtherFactors(order, indsp, facsp)

	Label("nnz")
	row := rowOffset(outp, k, sb)
	dst := Mem{Base: dst0, Index: row, Scale: 1}
	for q := range d {
		VMOVUPS(dst.Offset(4*s.lanes*q), d[q])
	}
	VBROADCASTSS(Mem{Base: valp, Index: k, Scale: 4}, v)
	o.addTerm(s, k, sb, v, t, d)
	for q := range d {
		VMOVUPS(d[q], dst.Offset(4*s.lanes*q))
	}
	INCQ(k)
	CMPQ(k, n)
	JB(LabelRef("nnz"))
	Label("done")
	VZEROUPPER()
	RET()
}

// altoScatter is mttkrpScatter for an order-3 or order-4 ALTO tensor with
// the index extraction fused in: each nonzero's indices are pulled out of
// its linear index with BMI2's PEXT (masks[0] the output mode's bits, then
// the other modes' in increasing order), so no decoded index is stored and
// read back. Two variants: the plain one, for linear indices of at most 64
// bits and a row length in bytes that is a power of two (shift is its
// log2; rank blocks are 8 to 64 columns, so R = 8, 16, 32, 64... qualify),
// turns an index into a row offset with one SHLX; the "BLCO" one ors in
// the bits a block's high word gives each mode (bases) and multiplies by
// the stride, for any tensor.
func altoScatter(s isa, nv, order int, blco bool) {
	name := fmt.Sprintf("altoScatter%d", order)
	if blco {
		name += "BLCO"
	}
	fs := "f0, f1"
	if order == 4 {
		fs += ", f2"
	}
	text(fn(name, s, nv), fmt.Sprintf("func(dst []float32, lin []uint64, vals []float32, masks *[%d]uint64, bases *[%d]uint32, %s *float32, rowBase, stride, shift int)", order, order, fs))
	Doc(fmt.Sprintf("%s%sx%d adds %d columns of each nonzero's MTTKRP term of an order-%d ALTO chunk into its output row (see asmgen).", name, s.name, nv, nv*s.lanes, order))
	linp := Load(Param("lin").Base(), GP64())
	valp := Load(Param("vals").Base(), GP64())
	f := []Register{Load(Param("f0"), GP64()), Load(Param("f1"), GP64())}
	if order == 4 {
		f = append(f, Load(Param("f2"), GP64()))
	}
	var sb Register
	if blco {
		sb = strideBytes()
	} else {
		sb = Load(Param("shift"), GP64())
	}
	// toOffset turns an extracted index into its row's byte offset.
	toOffset := func(r GPVirtual) {
		if blco {
			IMULQ(sb, r)
		} else {
			SHLXQ(sb, r, r)
		}
	}
	dst0 := Load(Param("rowBase"), GP64())
	if blco {
		IMULQ(sb, dst0)
	} else {
		SHLXQ(sb, dst0, dst0)
	}
	NEGQ(dst0)
	ADDQ(paramAddr(Param("dst").Base()), dst0)
	mp := Load(Param("masks"), GP64())
	var bp Register
	if blco {
		bp = Load(Param("bases"), GP64())
	}
	k := GP64()
	XORQ(k, k)
	CMPQ(paramAddr(Param("vals").Len()), U8(0))
	JE(LabelRef("done"))
	t := vecs(s, nv)
	d := vecs(s, nv)
	v := s.vec()

	Label("nnz")
	x := GP64()
	MOVQ(Mem{Base: linp, Index: k, Scale: 8}, x)
	// extract sets r to mode j's row offset (j = 0 is the output mode).
	extract := func(j int, r GPVirtual) {
		PEXTQ(Mem{Base: mp, Disp: 8 * j}, x, r)
		if blco {
			ORL(Mem{Base: bp, Disp: 4 * j}, r.As32())
		}
		toOffset(r)
	}
	row := GP64()
	extract(0, row)
	VBROADCASTSS(Mem{Base: valp, Index: k, Scale: 4}, v)
	for j := 0; j < order-2; j++ {
		a := GP64()
		extract(j+1, a)
		for q := range t {
			if j == 0 {
				VMULPS(rowMem(s, f[j], a, q), v, t[q])
			} else {
				VMULPS(rowMem(s, f[j], a, q), t[q], t[q])
			}
		}
	}
	// The last factor's index reuses x, which is dead after it.
	PEXTQ(Mem{Base: mp, Disp: 8 * (order - 1)}, x, x)
	if blco {
		ORL(Mem{Base: bp, Disp: 4 * (order - 1)}, x.As32())
	}
	toOffset(x)
	dst := Mem{Base: dst0, Index: row, Scale: 1}
	for q := range d {
		VMOVUPS(dst.Offset(4*s.lanes*q), d[q])
		VFMADD231PS(rowMem(s, f[order-2], x, q), t[q], d[q])
		VMOVUPS(d[q], dst.Offset(4*s.lanes*q))
	}
	INCQ(k)
	CMPQ(k, paramAddr(Param("vals").Len()))
	JB(LabelRef("nnz"))
	Label("done")
	VZEROUPPER()
	RET()
}

// altoRuns3 is altoScatter (order 3, BLCO variant) for modes whose runs of equal output index
// are long (a short mode, or one whose bits lie high in the linear index):
// a run's terms are summed in registers and added to its row once, as in
// mttkrpRuns, with the indices still extracted in the loop. Same arguments
// as altoScatter3BLCO (shift is not used).
func altoRuns3(s isa, nv int) {
	text(fn("altoRuns3", s, nv), "func(dst []float32, lin []uint64, vals []float32, masks *[3]uint64, bases *[3]uint32, f0, f1 *float32, rowBase, stride, shift int)")
	Doc(fmt.Sprintf("altoRuns3%sx%d adds %d columns of an order-3 ALTO chunk's MTTKRP into its output rows, one store per run (see asmgen).", s.name, nv, nv*s.lanes))
	linp := Load(Param("lin").Base(), GP64())
	valp := Load(Param("vals").Base(), GP64())
	f0 := Load(Param("f0"), GP64())
	f1 := Load(Param("f1"), GP64())
	sb := strideBytes()
	dst0 := Load(Param("rowBase"), GP64())
	IMULQ(sb, dst0)
	NEGQ(dst0)
	ADDQ(paramAddr(Param("dst").Base()), dst0)
	mp := Load(Param("masks"), GP64())
	bp := Load(Param("bases"), GP64())
	k := GP64()
	XORQ(k, k)
	CMPQ(paramAddr(Param("vals").Len()), U8(0))
	JE(LabelRef("done"))
	acc := vecs(s, nv)
	t := vecs(s, nv)
	v := s.vec()
	cur := GP64()
	// cur is the current run's row offset; the first nonzero starts a run.
	x := GP64()
	MOVQ(Mem{Base: linp}, x)
	PEXTQ(Mem{Base: mp}, x, cur)
	ORL(Mem{Base: bp}, cur.As32())
	IMULQ(sb, cur)
	zero(acc)

	Label("nnz")
	MOVQ(Mem{Base: linp, Index: k, Scale: 8}, x)
	row, a := GP64(), GP64()
	PEXTQ(Mem{Base: mp}, x, row)
	ORL(Mem{Base: bp}, row.As32())
	IMULQ(sb, row)
	CMPQ(row, cur)
	JE(LabelRef("same"))
	// A new run: add the finished one into its row.
	for q := range acc {
		VADDPS(Mem{Base: dst0, Index: cur, Scale: 1, Disp: 4 * s.lanes * q}, acc[q], acc[q])
		VMOVUPS(acc[q], Mem{Base: dst0, Index: cur, Scale: 1, Disp: 4 * s.lanes * q})
	}
	zero(acc)
	MOVQ(row, cur)
	Label("same")
	PEXTQ(Mem{Base: mp, Disp: 8}, x, a)
	ORL(Mem{Base: bp, Disp: 4}, a.As32())
	IMULQ(sb, a)
	PEXTQ(Mem{Base: mp, Disp: 16}, x, x)
	ORL(Mem{Base: bp, Disp: 8}, x.As32())
	IMULQ(sb, x)
	VBROADCASTSS(Mem{Base: valp, Index: k, Scale: 4}, v)
	for q := range t {
		VMULPS(rowMem(s, f0, a, q), v, t[q])
	}
	for q := range acc {
		VFMADD231PS(rowMem(s, f1, x, q), t[q], acc[q])
	}
	INCQ(k)
	CMPQ(k, paramAddr(Param("vals").Len()))
	JB(LabelRef("nnz"))
	for q := range acc {
		VADDPS(Mem{Base: dst0, Index: cur, Scale: 1, Disp: 4 * s.lanes * q}, acc[q], acc[q])
		VMOVUPS(acc[q], Mem{Base: dst0, Index: cur, Scale: 1, Disp: 4 * s.lanes * q})
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// hicooScatter3 is mttkrpScatter for a range of blocks of an order-3
// HiCOO tensor with the index rebuild fused in: a nonzero's index in mode
// m is its block's coordinate << bits plus its 8-bit offset. bptr holds the
// range's block pointers (absolute nonzero positions); bo, b0 and b1 point
// at the first block's coordinate in the output mode and the two others;
// eo, e0, e1 and vals at the whole offset and value arrays. Per block, each
// mode's block base is folded into a row pointer, so a nonzero costs one
// byte load, one multiply and one add per mode.
func hicooScatter3(s isa, nv int) {
	text(fn("hicooScatter3", s, nv), "func(dst []float32, bptr []uint32, bo, b0, b1 *uint32, eo, e0, e1 *uint8, vals *float32, f0, f1 *float32, rowBase, stride, bits int)")
	Doc(fmt.Sprintf("hicooScatter3%sx%d adds %d columns of each nonzero's MTTKRP term of a range of order-3 HiCOO blocks into its output row (see asmgen).", s.name, nv, nv*s.lanes))
	// Block-level state lives in stack slots: the nonzero loop needs
	// thirteen general registers of its own.
	bSlot, dstSlot, scaleSlot, sb := hicooSetup()
	valp := Load(Param("vals"), GP64())
	eo := Load(Param("eo"), GP64())
	e0 := Load(Param("e0"), GP64())
	e1 := Load(Param("e1"), GP64())
	t := vecs(s, nv)
	d := vecs(s, nv)
	v := s.vec()
	k, kend := GP64(), GP64()
	bo, b0, b1 := GP64(), GP64(), GP64()

	Label("block")
	b := GP64()
	MOVQ(bSlot, b)
	bp := Load(Param("bptr").Base(), GP64())
	MOVL(Mem{Base: bp, Index: b, Scale: 4}, k.As32())
	MOVL(Mem{Base: bp, Index: b, Scale: 4, Disp: 4}, kend.As32())
	// Row pointers of the block's base in each mode.
	for _, c := range []struct {
		reg   GPVirtual
		coord string
		base  Op
	}{{bo, "bo", dstSlot}, {b0, "b0", paramAddr(Param("f0"))}, {b1, "b1", paramAddr(Param("f1"))}} {
		p := Load(Param(c.coord), GP64())
		MOVL(Mem{Base: p, Index: b, Scale: 4}, c.reg.As32())
		IMULQ(scaleSlot, c.reg)
		ADDQ(c.base, c.reg)
	}
	CMPQ(k, kend)
	JAE(LabelRef("next"))
	Label("nnz")
	row, a, c := GP64(), GP64(), GP64()
	MOVBQZX(Mem{Base: eo, Index: k, Scale: 1}, row)
	IMULQ(sb, row)
	MOVBQZX(Mem{Base: e0, Index: k, Scale: 1}, a)
	IMULQ(sb, a)
	MOVBQZX(Mem{Base: e1, Index: k, Scale: 1}, c)
	IMULQ(sb, c)
	VBROADCASTSS(Mem{Base: valp, Index: k, Scale: 4}, v)
	for q := range t {
		VMULPS(Mem{Base: b0, Index: a, Scale: 1, Disp: 4 * s.lanes * q}, v, t[q])
	}
	dst := Mem{Base: bo, Index: row, Scale: 1}
	for q := range d {
		VMOVUPS(dst.Offset(4*s.lanes*q), d[q])
		VFMADD231PS(Mem{Base: b1, Index: c, Scale: 1, Disp: 4 * s.lanes * q}, t[q], d[q])
		VMOVUPS(d[q], dst.Offset(4*s.lanes*q))
	}
	INCQ(k)
	CMPQ(k, kend)
	JB(LabelRef("nnz"))
	hicooNext(bSlot, b)
}

// hicooSetup starts a hicooScatter function: it keeps in stack slots the
// index of the current block (from 0), the output's address less rowBase
// rows, and the bytes a block coordinate moves a row pointer by (the row
// stride << bits), returns them with the row stride in bytes, and jumps
// to "done" when bptr holds no block.
func hicooSetup() (bSlot, dstSlot, scaleSlot Mem, sb Register) {
	bSlot, dstSlot, scaleSlot = AllocLocal(8), AllocLocal(8), AllocLocal(8)
	sb = strideBytes()
	x := Load(Param("rowBase"), GP64())
	IMULQ(sb, x)
	NEGQ(x)
	ADDQ(paramAddr(Param("dst").Base()), x)
	MOVQ(x, dstSlot)
	y := Load(Param("bits"), GP64())
	MOVQ(y, RCX)
	MOVQ(sb, x)
	SHLQ(CL, x)
	MOVQ(x, scaleSlot)
	MOVQ(U32(0), bSlot)
	n := Load(Param("bptr").Len(), GP64())
	CMPQ(n, U8(1))
	JBE(LabelRef("done"))
	return bSlot, dstSlot, scaleSlot, sb
}

// hicooNext ends a hicooScatter function: label "next" moves to the
// following block (b is scratch) and back to "block" while there is one.
func hicooNext(bSlot Mem, b Register) {
	Label("next")
	MOVQ(bSlot, b)
	INCQ(b)
	MOVQ(b, bSlot)
	INCQ(b)
	CMPQ(b, paramAddr(Param("bptr").Len()))
	JB(LabelRef("block"))
	Label("done")
	VZEROUPPER()
	RET()
}

// hicooScatter4 is hicooScatter3 for an order-4 HiCOO tensor: b2, e2 and
// f2 are the third other mode's. The nonzero loop needs fourteen values
// in general registers with the block's end among them, one more than
// there are: the end is compared in its stack slot.
func hicooScatter4(s isa, nv int) {
	text(fn("hicooScatter4", s, nv), "func(dst []float32, bptr []uint32, bo, b0, b1, b2 *uint32, eo, e0, e1, e2 *uint8, vals *float32, f0, f1, f2 *float32, rowBase, stride, bits int)")
	Doc(fmt.Sprintf("hicooScatter4%sx%d adds %d columns of each nonzero's MTTKRP term of a range of order-4 HiCOO blocks into its output row (see asmgen).", s.name, nv, nv*s.lanes))
	bSlot, dstSlot, scaleSlot, sb := hicooSetup()
	endSlot := AllocLocal(8)
	valp := Load(Param("vals"), GP64())
	eo := Load(Param("eo"), GP64())
	e0 := Load(Param("e0"), GP64())
	e1 := Load(Param("e1"), GP64())
	e2 := Load(Param("e2"), GP64())
	t := vecs(s, nv)
	d := vecs(s, nv)
	v := s.vec()
	k := GP64()
	bo, b0, b1, b2 := GP64(), GP64(), GP64(), GP64()

	Label("block")
	b := GP64()
	MOVQ(bSlot, b)
	bp := Load(Param("bptr").Base(), GP64())
	MOVL(Mem{Base: bp, Index: b, Scale: 4}, k.As32())
	end := GP32()
	MOVL(Mem{Base: bp, Index: b, Scale: 4, Disp: 4}, end)
	MOVQ(end.As64(), endSlot)
	for _, c := range []struct {
		reg   GPVirtual
		coord string
		base  Op
	}{{bo, "bo", dstSlot}, {b0, "b0", paramAddr(Param("f0"))}, {b1, "b1", paramAddr(Param("f1"))}, {b2, "b2", paramAddr(Param("f2"))}} {
		p := Load(Param(c.coord), GP64())
		MOVL(Mem{Base: p, Index: b, Scale: 4}, c.reg.As32())
		IMULQ(scaleSlot, c.reg)
		ADDQ(c.base, c.reg)
	}
	CMPQ(k, endSlot)
	JAE(LabelRef("next"))
	Label("nnz")
	row, a := GP64(), GP64()
	MOVBQZX(Mem{Base: eo, Index: k, Scale: 1}, row)
	IMULQ(sb, row)
	MOVBQZX(Mem{Base: e0, Index: k, Scale: 1}, a)
	IMULQ(sb, a)
	VBROADCASTSS(Mem{Base: valp, Index: k, Scale: 4}, v)
	for q := range t {
		VMULPS(Mem{Base: b0, Index: a, Scale: 1, Disp: 4 * s.lanes * q}, v, t[q])
	}
	c := GP64()
	MOVBQZX(Mem{Base: e1, Index: k, Scale: 1}, c)
	IMULQ(sb, c)
	for q := range t {
		VMULPS(Mem{Base: b1, Index: c, Scale: 1, Disp: 4 * s.lanes * q}, t[q], t[q])
	}
	e := GP64()
	MOVBQZX(Mem{Base: e2, Index: k, Scale: 1}, e)
	IMULQ(sb, e)
	dst := Mem{Base: bo, Index: row, Scale: 1}
	for q := range d {
		VMOVUPS(dst.Offset(4*s.lanes*q), d[q])
		VFMADD231PS(Mem{Base: b2, Index: e, Scale: 1, Disp: 4 * s.lanes * q}, t[q], d[q])
		VMOVUPS(d[q], dst.Offset(4*s.lanes*q))
	}
	INCQ(k)
	CMPQ(k, endSlot)
	JB(LabelRef("nnz"))
	hicooNext(bSlot, b)
}

// fiberLevel emits the two lowest levels of a CSF walk, for fibers
// [j, jend) of the level above the leaves: each fiber's leaves are summed
// into t (Σ vals[k]·A_leaf row idxLeaf[k], k over ptr[j]..ptr[j+1]), then
// hoisted into acc (acc += t ⊙ A_fiber row idxFiber[j]). name prefixes its
// labels; it falls through when the fibers are done.
func fiberLevel(s isa, name string, j, jend, k, kend, ptr, idxFiber, idxLeaf, valp, aFiber, aLeaf, sb Register, v VecVirtual, t, acc []VecVirtual) {
	Label(name + "fiber")
	zero(t)
	MOVL(Mem{Base: ptr, Index: j, Scale: 4}, k.(GPVirtual).As32())
	MOVL(Mem{Base: ptr, Index: j, Scale: 4, Disp: 4}, kend.(GPVirtual).As32())
	CMPQ(k, kend)
	JAE(LabelRef(name + "hoist"))
	Label(name + "leaf")
	addScaledRow(s, idxLeaf, valp, aLeaf, k, sb, v, t)
	INCQ(k)
	CMPQ(k, kend)
	JB(LabelRef(name + "leaf"))
	Label(name + "hoist")
	b := rowOffset(idxFiber, j, sb)
	for q := range acc {
		VFMADD231PS(rowMem(s, aFiber, b, q), t[q], acc[q])
	}
	INCQ(j)
	CMPQ(j, jend)
	JB(LabelRef(name + "fiber"))
}

// csf3: for each root fiber f of an order-3 CSF, out row roots[f] =
// Σ_{j in fiber f} (Σ_{k in fiber j} vals[k]·A2 row idx2[k]) ⊙ A1 row idx1[j]
// (SPLATT's hoisting: one multiply by A1 per middle fiber, not per
// nonzero). ptr0 has len(roots)+1 entries; idx1, ptr1, idx2 and vals are the
// whole level arrays.
func csf3(s isa, nv int) {
	text(fn("csf3", s, nv), "func(out []float32, roots, ptr0 []uint32, idx1, ptr1, idx2 *uint32, vals *float32, a1, a2 *float32, stride int)")
	Doc(fmt.Sprintf("csf3%sx%d sets %d columns of the root rows of an order-3 CSF (see asmgen).", s.name, nv, nv*s.lanes))
	// Sixteen general registers are too few to hold every array base: the
	// root-level ones are reloaded from the arguments once per root fiber.
	idx1 := Load(Param("idx1"), GP64())
	ptr1 := Load(Param("ptr1"), GP64())
	idx2 := Load(Param("idx2"), GP64())
	valp := Load(Param("vals"), GP64())
	a1 := Load(Param("a1"), GP64())
	a2 := Load(Param("a2"), GP64())
	sb := strideBytes()
	f := GP64()
	XORQ(f, f)
	nroots := Load(Param("roots").Len(), GP64())
	CMPQ(nroots, U8(0))
	JE(LabelRef("done"))
	acc := vecs(s, nv)
	t := vecs(s, nv)
	v := s.vec()
	j, jend, k, kend := GP64(), GP64(), GP64(), GP64()

	Label("root")
	zero(acc)
	ptr0 := Load(Param("ptr0").Base(), GP64())
	MOVL(Mem{Base: ptr0, Index: f, Scale: 4}, j.As32())
	MOVL(Mem{Base: ptr0, Index: f, Scale: 4, Disp: 4}, jend.As32())
	CMPQ(j, jend)
	JAE(LabelRef("store"))
	fiberLevel(s, "", j, jend, k, kend, ptr1, idx1, idx2, valp, a1, a2, sb, v, t, acc)
	Label("store")
	rootp := Load(Param("roots").Base(), GP64())
	r := rowOffset(rootp, f, sb)
	outp := Load(Param("out").Base(), GP64())
	for q := range acc {
		VMOVUPS(acc[q], rowMem(s, outp, r, q))
	}
	INCQ(f)
	CMPQ(f, paramAddr(Param("roots").Len()))
	JB(LabelRef("root"))
	Label("done")
	VZEROUPPER()
	RET()
}

// csf4: csf3 one level deeper, for order-4 CSF: out row roots[f] =
// Σ_{i in f} A1 row idx1[i] ⊙ Σ_{j in i} A2 row idx2[j] ⊙ Σ_{k in j}
// vals[k]·A3 row idx3[k]. The first level's loop state lives in stack
// slots, so that the two inner loops keep their arrays in registers.
func csf4(s isa, nv int) {
	text(fn("csf4", s, nv), "func(out []float32, roots, ptr0 []uint32, idx1, ptr1, idx2, ptr2, idx3 *uint32, vals *float32, a1, a2, a3 *float32, stride int)")
	Doc(fmt.Sprintf("csf4%sx%d sets %d columns of the root rows of an order-4 CSF (see asmgen).", s.name, nv, nv*s.lanes))
	fSlot, iSlot, iendSlot := AllocLocal(8), AllocLocal(8), AllocLocal(8)
	ptr2 := Load(Param("ptr2"), GP64())
	idx2 := Load(Param("idx2"), GP64())
	idx3 := Load(Param("idx3"), GP64())
	valp := Load(Param("vals"), GP64())
	a2 := Load(Param("a2"), GP64())
	a3 := Load(Param("a3"), GP64())
	sb := strideBytes()
	MOVQ(U32(0), fSlot)
	n := Load(Param("roots").Len(), GP64())
	CMPQ(n, U8(0))
	JE(LabelRef("done"))
	acc := vecs(s, nv)
	t1 := vecs(s, nv)
	t2 := vecs(s, nv)
	v := s.vec()
	j, jend, k, kend := GP64(), GP64(), GP64(), GP64()

	Label("root")
	zero(acc)
	f := GP64()
	MOVQ(fSlot, f)
	p0 := Load(Param("ptr0").Base(), GP64())
	i := GP64()
	MOVL(Mem{Base: p0, Index: f, Scale: 4}, i.As32())
	MOVQ(i, iSlot)
	MOVL(Mem{Base: p0, Index: f, Scale: 4, Disp: 4}, i.As32())
	MOVQ(i, iendSlot)
	Label("level1")
	i1 := GP64()
	MOVQ(iSlot, i1)
	CMPQ(i1, iendSlot)
	JAE(LabelRef("store"))
	zero(t1)
	p1 := Load(Param("ptr1"), GP64())
	MOVL(Mem{Base: p1, Index: i1, Scale: 4}, j.As32())
	MOVL(Mem{Base: p1, Index: i1, Scale: 4, Disp: 4}, jend.As32())
	CMPQ(j, jend)
	JAE(LabelRef("hoist1"))
	fiberLevel(s, "level2", j, jend, k, kend, ptr2, idx2, idx3, valp, a2, a3, sb, v, t2, t1)
	Label("hoist1")
	i2 := GP64()
	MOVQ(iSlot, i2)
	ix1 := Load(Param("idx1"), GP64())
	a := rowOffset(ix1, i2, sb)
	fa1 := Load(Param("a1"), GP64())
	for q := range acc {
		VFMADD231PS(rowMem(s, fa1, a, q), t1[q], acc[q])
	}
	INCQ(i2)
	MOVQ(i2, iSlot)
	JMP(LabelRef("level1"))
	Label("store")
	f2 := GP64()
	MOVQ(fSlot, f2)
	rootp := Load(Param("roots").Base(), GP64())
	r := rowOffset(rootp, f2, sb)
	outp := Load(Param("out").Base(), GP64())
	for q := range acc {
		VMOVUPS(acc[q], rowMem(s, outp, r, q))
	}
	INCQ(f2)
	MOVQ(f2, fSlot)
	CMPQ(f2, paramAddr(Param("roots").Len()))
	JB(LabelRef("root"))
	Label("done")
	VZEROUPPER()
	RET()
}

// addTo: dst[i] += src[i] for i < len(dst), len(dst) a multiple of
// 4·lanes. It is the reduction of the MTTKRP's private output copies,
// which reads and writes whole rows of floats.
func addTo(s isa) {
	text("addTo"+s.name, "func(dst, src []float32)")
	Doc(fmt.Sprintf("addTo%s adds src into dst, 4·%d floats per step; len(dst) must be a multiple of %d (see asmgen).", s.name, s.lanes, 4*s.lanes))
	dp := Load(Param("dst").Base(), GP64())
	sp := Load(Param("src").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	SHLQ(U8(2), n)
	ADDQ(dp, n) // n: the end of dst
	CMPQ(dp, n)
	JAE(LabelRef("done"))
	v := vecs(s, 4)
	Label("loop")
	for q := range v {
		VMOVUPS(Mem{Base: sp, Disp: 4 * s.lanes * q}, v[q])
		VADDPS(Mem{Base: dp, Disp: 4 * s.lanes * q}, v[q], v[q])
		VMOVUPS(v[q], Mem{Base: dp, Disp: 4 * s.lanes * q})
	}
	ADDQ(U32(16*s.lanes), dp)
	ADDQ(U32(16*s.lanes), sp)
	CMPQ(dp, n)
	JB(LabelRef("loop"))
	Label("done")
	VZEROUPPER()
	RET()
}

// elementwise: dst[i] = x[i] op y[i] (add, sub, mul), or max(x[i], 0)
// (relu: y unused), for i < len(dst), len(dst) a multiple of lanes. They
// are the network's elementwise nodes; x and y are at least as long.
func elementwise(s isa, op string) {
	name := op + "Vec" + s.name
	text(name, "func(dst, x, y []float32)")
	Doc(fmt.Sprintf("%s sets dst[i] to %s for i < len(dst), a multiple of %d (see asmgen's elementwise).", name, map[string]string{"add": "x[i]+y[i]", "sub": "x[i]-y[i]", "mul": "x[i]·y[i]", "relu": "max(x[i], 0)"}[op], s.lanes))
	dp := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	yp := Load(Param("y").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	SHLQ(U8(2), n)
	i := GP64()
	XORQ(i, i)
	v, z := s.vec(), s.vec()
	VXORPS(z, z, z)
	CMPQ(i, n)
	JAE(LabelRef("done"))
	Label("loop")
	x := Mem{Base: xp, Index: i, Scale: 1}
	y := Mem{Base: yp, Index: i, Scale: 1}
	switch op {
	case "add":
		VMOVUPS(x, v)
		VADDPS(y, v, v)
	case "sub":
		VMOVUPS(x, v)
		VSUBPS(y, v, v)
	case "mul":
		VMOVUPS(x, v)
		VMULPS(y, v, v)
	case "relu":
		// MAXPS returns its second source where either is NaN: x goes
		// there, so a NaN stays NaN as Go's max keeps it.
		VMAXPS(x, z, v)
	}
	VMOVUPS(v, Mem{Base: dp, Index: i, Scale: 1})
	ADDQ(U32(4*s.lanes), i)
	CMPQ(i, n)
	JB(LabelRef("loop"))
	Label("done")
	VZEROUPPER()
	RET()
}

// gemmBlock: c row r, columns [0, nv·lanes) = Σ_{p<k} a[r·lda+p]·(b row
// p), for r < rows; rows of a, b and c are lda, ldb and ldc floats apart.
// It is the dense product of small matrices (the predictor's network): the
// rows·nv accumulators stay in registers while b's rows stream past, so
// the multiply-adds of distinct rows overlap rather than wait on one
// another's result, as one sparse row's do.
func gemmBlock(s isa, rows, nv int) {
	name := fmt.Sprintf("gemm%dx%sx%d", rows, s.name, nv)
	text(name, "func(c, a, b []float32, k, lda, ldb, ldc int)")
	Doc(fmt.Sprintf("%s sets columns [0, %d) of c's first %d row(s) to a·b over k terms (see asmgen's gemmBlock).", name, nv*s.lanes, rows))
	cp := Load(Param("c").Base(), GP64())
	ap := Load(Param("a").Base(), GP64())
	bp := Load(Param("b").Base(), GP64())
	kb := Load(Param("k"), GP64())
	SHLQ(U8(2), kb) // k in bytes: the end of the row offset
	lda := Load(Param("lda"), GP64())
	SHLQ(U8(2), lda)
	ldb := Load(Param("ldb"), GP64())
	SHLQ(U8(2), ldb)
	// ar[r] is row r of a; p, the byte offset of term p in each.
	ar := make([]Register, rows)
	ar[0] = ap
	for r := 1; r < rows; r++ {
		ar[r] = GP64()
		MOVQ(ar[r-1], ar[r])
		ADDQ(lda, ar[r])
	}
	acc := vecs(s, rows*nv)
	zero(acc)
	bv := vecs(s, nv)
	bc := s.vec()
	p := GP64()
	XORQ(p, p)
	CMPQ(p, kb)
	JAE(LabelRef("store"))
	Label("loop")
	for v := range nv {
		VMOVUPS(Mem{Base: bp, Disp: 4 * s.lanes * v}, bv[v])
	}
	for r := range rows {
		VBROADCASTSS(Mem{Base: ar[r], Index: p, Scale: 1}, bc)
		for v := range nv {
			VFMADD231PS(bv[v], bc, acc[r*nv+v])
		}
	}
	ADDQ(ldb, bp)
	ADDQ(U8(4), p)
	CMPQ(p, kb)
	JB(LabelRef("loop"))
	Label("store")
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	for r := range rows {
		for v := range nv {
			VMOVUPS(acc[r*nv+v], Mem{Base: cp, Disp: 4 * s.lanes * v})
		}
		if r < rows-1 {
			ADDQ(ldc, cp)
		}
	}
	VZEROUPPER()
	RET()
}

// pextDecode: dst[i] = base | pext(lin[i], mask), with BMI2's PEXT. It is
// ALTO's index extraction in one instruction (formats.ALTOMode.Decode does
// the same in six rounds of shifts and masks).
func pextDecode() {
	text("pextDecode", "func(dst []uint32, lin []uint64, mask uint64, base uint32)")
	Doc("pextDecode sets dst[i] = base | pext(lin[i], mask) for i < len(dst); lin is at least as long.")
	dstp := Load(Param("dst").Base(), GP64())
	linp := Load(Param("lin").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	mask := Load(Param("mask"), GP64())
	base := Load(Param("base"), GP32())
	i := GP64()
	XORQ(i, i)
	CMPQ(n, U8(0))
	JE(LabelRef("done"))
	Label("loop")
	x := GP64()
	MOVQ(Mem{Base: linp, Index: i, Scale: 8}, x)
	PEXTQ(mask, x, x)
	ORL(base, x.As32())
	MOVL(x.As32(), Mem{Base: dstp, Index: i, Scale: 4})
	INCQ(i)
	CMPQ(i, n)
	JB(LabelRef("loop"))
	Label("done")
	RET()
}

// cpuid exposes the CPUID instruction, for the vendor and family checks
// that golang.org/x/sys/cpu does not make (PEXT is microcode on AMD before
// Zen 3).
func cpuid() {
	TEXT("cpuid", NOSPLIT, "func(leaf, sub uint32) (eax, ebx, ecx, edx uint32)")
	Doc("cpuid returns the registers CPUID sets for a leaf and subleaf.")
	Load(Param("leaf"), EAX)
	Load(Param("sub"), ECX)
	CPUID()
	Store(EAX, Return("eax"))
	Store(EBX, Return("ebx"))
	Store(ECX, Return("ecx"))
	Store(EDX, Return("edx"))
	RET()
}

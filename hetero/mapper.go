package hetero

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// The task mapper splits the slices of a tensor (a slice is every nonzero
// sharing the index of the slicing mode; its nonzero count is its work)
// between the CPU (side 0, c) and an accelerator (side 1, g).
//
// The model (the paper's §5). A device d given M_d bytes of tensor data
// does W_d = μ·M_d flops at λ·P_d flops/s and streams M_d bytes at B_d
// bytes/s; the accelerator's share is also sent over the link at B bytes/s
// first:
//
//	t_c = t_cp + t_cm       = μ·M_c/(λ·P_c) + M_c/B_c
//	t_g = t_gp + t_gm + t_r = μ·M_g/(λ·P_g) + M_g/B_g + M_g/B
//
// Both finish together when t_c = t_g with M_c = M − M_g. Write the time
// per byte of each side as
//
//	a_c = μ/(λP_c) + 1/B_c             = (μ·B_c + λ·P_c) / (λ·P_c·B_c)
//	a_g = μ/(λP_g) + 1/B_g + 1/B       = (μ·B_g·B + λ·P_g·B + λ·P_g·B_g) / (λ·P_g·B_g·B)
//
// then (M − M_g)·a_c = M_g·a_g gives M_g = a_c/(a_c + a_g) · M, and
// multiplying a_c and a_g by λ·P_c·B_c·P_g·B_g·B:
//
//	M_g = P_g·B_g·B·(μB_c + λP_c) / [P_g·B_g·B·(μB_c + λP_c) + P_c·B_c·(μB_g·B + λP_g·B + λP_g·B_g)] · M
//
// which is DESIGN.md's formula. The code keeps the general form: λ, μ
// and the bytes per nonzero b are each device's own (calibrated in the
// format it runs), so it works per nonzero, with the seconds per nonzero
//
//	τ_d = b_d·μ_d/(λ_d·P_d) + b_d/B_d (+ b_d/B for a device behind a link)
//
// and the accelerator's share of the nonzeros nnz_g = τ_c/(τ_c + τ_g) ·
// nnz. With λ, μ and b the same on both sides, b cancels and this is the
// formula above. A link bandwidth of 0 means no transfer (the CPU).

// Strategy is how MapSlices splits the slices.
type Strategy int

const (
	// SplitPeak deals the slices, largest first, to meet the quotas of
	// the peak-power formula.
	SplitPeak Strategy = iota + 1
	// SplitDynamic cuts the slices into chunks that both devices pull
	// from a ChunkQueue as they run; MapSlices predicts the result by
	// simulating the pulls with the model's times.
	SplitDynamic
	// SplitRandom is the paper's baseline: each slice to either device
	// with probability 1/2, from a seeded generator.
	SplitRandom
	// SplitCPU puts every slice on the CPU.
	SplitCPU
	// SplitAcc puts every slice on the accelerator.
	SplitAcc
)

var strategyNames = []string{SplitPeak: "peak", SplitDynamic: "dynamic", SplitRandom: "random", SplitCPU: "cpu", SplitAcc: "acc"}

// String returns the name ParseStrategy reads.
func (s Strategy) String() string {
	if s >= SplitPeak && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// MarshalText writes the strategy's name, for JSON.
func (s Strategy) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Strategies lists the strategies' names.
func Strategies() []string { return slices.Clone(strategyNames[SplitPeak:]) }

// ParseStrategy reads a strategy's name: peak, dynamic, random, cpu or acc.
func ParseStrategy(name string) (Strategy, error) {
	for s := SplitPeak; int(s) < len(strategyNames); s++ {
		if strings.EqualFold(name, strategyNames[s]) {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown split strategy %q, expected one of %s", name, strings.Join(Strategies(), ", "))
}

// The sides of a split, indices of Split's arrays.
const (
	OnCPU = 0
	OnAcc = 1
)

// Split is the mapper's answer.
type Split struct {
	Strategy Strategy `json:"strategy"`
	// Slices holds the slice ids each side runs: [OnCPU], [OnAcc]. Every
	// slice is in exactly one, in the order dealt (largest first for
	// peak and dynamic, by id for the others).
	Slices [2][]int `json:"slices"`
	// NNZ is the nonzeros of each side.
	NNZ [2]int64 `json:"nnz"`
	// Predicted is each side's time by the model, in seconds (see Cost;
	// for dynamic, from the simulated pulls, transfers overlapping
	// kernels).
	Predicted [2]float64 `json:"predicted_seconds"`
	// AccShare is the accelerator's share of the nonzeros the strategy
	// aims at: τ_c/(τ_c+τ_g) for peak and dynamic, 1/2 for random, 0 or
	// 1 for cpu and acc.
	AccShare float64 `json:"acc_share"`
	// ChunkNNZ is the target nonzeros per chunk (dynamic only).
	ChunkNNZ int64 `json:"chunk_nnz,omitempty"`
}

// Imbalance returns |t_c − t_g| / max(t_c, t_g) of the predicted times (0
// when both are 0).
func (s *Split) Imbalance() float64 {
	hi := max(s.Predicted[0], s.Predicted[1])
	if hi <= 0 {
		return 0
	}
	return math.Abs(s.Predicted[0]-s.Predicted[1]) / hi
}

// Cost is the model's time per nonzero on one device for one operation,
// by phase, in seconds: Compute b·μ/(λ·P), Memory b/B_mem and Transfer
// b/B_link (0 without a link), b the bytes per nonzero.
type Cost struct {
	Compute, Memory, Transfer float64
}

// Total returns the sum of the phases: the paper's additive model.
func (c Cost) Total() float64 { return c.Compute + c.Memory + c.Transfer }

// Cost returns the model's time per nonzero of op on the device, or an
// error naming the first number of the profile it cannot use. Its
// Transfer is the paper's: the tensor's bytes cross the link with every
// run (CostFor with the zero Traffic).
func (d DeviceProfile) Cost(op Op) (Cost, error) { return d.CostFor(op, Traffic{}) }

// Traffic is what crosses an accelerator's link in one run, beyond the
// profile's numbers, which know the device but not the tensor.
type Traffic struct {
	// RunBytesPerNNZ is what one run sends and fetches besides the
	// tensor (the dense operands and the result), divided by the
	// tensor's nonzeros.
	RunBytesPerNNZ float64
	// Resident says the tensor stays on the device between runs (a plan
	// that runs many times binds it once), so its bytes do not cross
	// the link per run.
	Resident bool
}

// CostFor returns the model's time per nonzero of op on the device when
// each run moves t over the link: Transfer is (b + RunBytesPerNNZ)/B_link,
// or RunBytesPerNNZ/B_link for a resident tensor.
func (d DeviceProfile) CostFor(op Op, t Traffic) (Cost, error) {
	if err := d.check(op); err != nil {
		return Cost{}, err
	}
	if !(t.RunBytesPerNNZ >= 0) || math.IsInf(t.RunBytesPerNNZ, 0) {
		return Cost{}, fmt.Errorf("run bytes per nonzero %v: expected a finite number >= 0", t.RunBytesPerNNZ)
	}
	o, _ := d.Op(op)
	c := Cost{Compute: o.BytesPerNNZ * o.Mu / (o.Lambda * d.FMAGFlops * 1e9), Memory: o.BytesPerNNZ / (d.MemoryGBs * 1e9)}
	if d.LinkGBs > 0 {
		moved := t.RunBytesPerNNZ
		if !t.Resident {
			moved += o.BytesPerNNZ
		}
		c.Transfer = moved / (d.LinkGBs * 1e9)
	}
	return c, nil
}

// PeakShare returns the accelerator's share of the nonzeros by the
// peak-power formula, τ_c/(τ_c + τ_g), from the two sides' costs.
func PeakShare(cpu, acc Cost) float64 {
	tc, tg := cpu.Total(), acc.Total()
	if !(tc+tg > 0) {
		return 0.5
	}
	return tc / (tc + tg)
}

// MapSlices splits the slices, given their nonzero counts, between the
// CPU and the accelerator with the profiles' numbers for op. Ties are
// broken by slice id and, between the sides, towards the CPU (for
// dynamic, towards the faster side), so the result depends only on
// the arguments; seed drives SplitRandom only. A profile that lacks a
// number the strategy needs is an error naming it (cpu and acc need only
// their own side's profile).
func MapSlices(strategy Strategy, sliceNNZ []int64, cpu, acc DeviceProfile, op Op, seed uint64) (*Split, error) {
	return MapSlicesFor(strategy, sliceNNZ, cpu, acc, op, seed, Traffic{})
}

// MapSlicesFor is MapSlices with the link's traffic per run known (see
// Traffic): a plan whose tensor stays on the accelerator pays the link
// only for the operands and the result, and the split gives the
// accelerator the larger share that earns it.
func MapSlicesFor(strategy Strategy, sliceNNZ []int64, cpu, acc DeviceProfile, op Op, seed uint64, traffic Traffic) (*Split, error) {
	var total int64
	for i, n := range sliceNNZ {
		if n < 0 {
			return nil, fmt.Errorf("split: slice %d has %d nonzeros", i, n)
		}
		total += n
	}
	var cost [2]Cost
	for side, p := range [2]DeviceProfile{cpu, acc} {
		if (strategy == SplitCPU && side == OnAcc) || (strategy == SplitAcc && side == OnCPU) {
			continue
		}
		c, err := p.CostFor(op, traffic)
		if err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
		cost[side] = c
	}
	s := &Split{Strategy: strategy}
	switch strategy {
	case SplitPeak:
		s.AccShare = PeakShare(cost[OnCPU], cost[OnAcc])
		dealPeak(s, sliceNNZ, total)
	case SplitDynamic:
		s.AccShare = PeakShare(cost[OnCPU], cost[OnAcc])
		ac := cost[OnAcc]
		s.ChunkNNZ = ChunkNNZ(total, ac.Compute+ac.Memory, ac.Transfer, DefaultChunkOverhead)
		q, err := NewChunkQueue(sliceNNZ, s.ChunkNNZ)
		if err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
		simulateDynamic(s, q, cost, DefaultChunkOverhead)
		return s, nil
	case SplitRandom:
		s.AccShare = 0.5
		rng := rand.New(rand.NewPCG(seed, 0x72616e646f6d)) // "random"
		for i := range sliceNNZ {
			s.add(int(rng.Uint64()&1), i, sliceNNZ[i])
		}
	case SplitCPU, SplitAcc:
		side := OnCPU
		if strategy == SplitAcc {
			side, s.AccShare = OnAcc, 1
		}
		for i, n := range sliceNNZ {
			s.add(side, i, n)
		}
	default:
		return nil, fmt.Errorf("split: unknown strategy %v", strategy)
	}
	for side := range 2 {
		s.Predicted[side] = float64(s.NNZ[side]) * cost[side].Total()
	}
	return s, nil
}

func (s *Split) add(side, slice int, nnz int64) {
	s.Slices[side] = append(s.Slices[side], slice)
	s.NNZ[side] += nnz
}

// Contiguous re-deals a two-sided split as two ranges of slice ids, the
// CPU's [0, k) and the accelerator's [k, n), k chosen so the CPU's
// nonzeros come closest to what the split gave it. A side whose slices are
// one range can write its part of an output laid out slice by slice in
// place (SpTTM's Y), with no gather; largest-first dealing scatters the
// slices but meets the quotas within one slice. So it re-deals only when
// the ranges move at most tol of the nonzeros between the sides, and
// reports whether it did; the predicted times scale with the nonzeros.
func (s *Split) Contiguous(sliceNNZ []int64, tol float64) bool {
	total := s.NNZ[OnCPU] + s.NNZ[OnAcc]
	if len(s.Slices[OnCPU]) == 0 || len(s.Slices[OnAcc]) == 0 || total == 0 {
		return false
	}
	var (
		k      int
		prefix int64
		want   = s.NNZ[OnCPU]
	)
	for k < len(sliceNNZ) && prefix+sliceNNZ[k] <= want {
		prefix += sliceNNZ[k]
		k++
	}
	// Take the slice that straddles the quota too if that comes closer.
	if k < len(sliceNNZ) && prefix+sliceNNZ[k]-want < want-prefix {
		prefix += sliceNNZ[k]
		k++
	}
	if float64(max(prefix-want, want-prefix)) > tol*float64(total) || k == 0 || k == len(sliceNNZ) {
		return false
	}
	for side, n := range [2]int64{prefix, total - prefix} {
		if s.NNZ[side] > 0 {
			s.Predicted[side] *= float64(n) / float64(s.NNZ[side])
		}
		s.NNZ[side] = n
	}
	s.Slices[OnCPU], s.Slices[OnAcc] = s.Slices[OnCPU][:0], s.Slices[OnAcc][:0]
	for i := range sliceNNZ {
		side := OnCPU
		if i >= k {
			side = OnAcc
		}
		s.Slices[side] = append(s.Slices[side], i)
	}
	return true
}

// bySize returns the slice ids by nonzeros, largest first, ties by id.
func bySize(sliceNNZ []int64) []int {
	order := make([]int, len(sliceNNZ))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case sliceNNZ[a] > sliceNNZ[b]:
			return -1
		case sliceNNZ[a] < sliceNNZ[b]:
			return 1
		}
		return 0
	})
	return order
}

// dealPeak deals the slices, largest first, to meet the quotas Q_g =
// AccShare·nnz and Q_c = nnz − Q_g: each goes to the side whose load
// after taking it is the smaller fraction of its quota, (load + n)/Q, so
// a side's predicted finish time. That is the largest-first rule for two
// machines of different speeds; it lands within one slice of the quotas
// and puts a slice larger than a quota on the faster side.
func dealPeak(s *Split, sliceNNZ []int64, total int64) {
	q := [2]float64{(1 - s.AccShare) * float64(total), s.AccShare * float64(total)}
	fill := func(side int, n int64) float64 {
		if q[side] <= 0 {
			return math.Inf(1)
		}
		return float64(s.NNZ[side]+n) / q[side]
	}
	for _, i := range bySize(sliceNNZ) {
		side := OnCPU
		if fill(OnAcc, sliceNNZ[i]) < fill(OnCPU, sliceNNZ[i]) {
			side = OnAcc
		}
		s.add(side, i, sliceNNZ[i])
	}
}

// simulateDynamic plays the chunk queue with the model's times: the CPU
// takes the next chunk when it is idle; the accelerator takes one when its
// copy engine is free and one of its two staging buffers is (the chunk
// before the previous has finished its kernel), sends it, and runs it
// once it has arrived and the previous kernel has finished, paying the
// per-chunk overhead (not for a chunk of empty slices). When both are
// ready at once, the one with the smaller time per nonzero pulls first
// (the CPU on a tie).
func simulateDynamic(s *Split, q *ChunkQueue, cost [2]Cost, overhead float64) {
	cpuFree := 0.0 // when the CPU is idle
	accPull := 0.0 // when the accelerator can start sending a chunk
	accDone := 0.0 // when its last queued kernel ends
	accCompute := cost[OnAcc].Compute + cost[OnAcc].Memory
	accFirst := cost[OnAcc].Total() < cost[OnCPU].Total()
	for {
		c, ok := q.Next()
		if !ok {
			break
		}
		n := float64(c.NNZ)
		if accPull < cpuFree || (accPull == cpuFree && accFirst) {
			sent := accPull + n*cost[OnAcc].Transfer
			prevDone := accDone // frees the buffer this chunk's successor uses
			if c.NNZ > 0 {
				accDone = max(sent, accDone) + overhead + n*accCompute
			}
			accPull = max(sent, prevDone)
			s.Slices[OnAcc] = append(s.Slices[OnAcc], c.Slices...)
			s.NNZ[OnAcc] += c.NNZ
		} else {
			cpuFree += n * cost[OnCPU].Total()
			s.Slices[OnCPU] = append(s.Slices[OnCPU], c.Slices...)
			s.NNZ[OnCPU] += c.NNZ
		}
	}
	s.Predicted = [2]float64{cpuFree, accDone}
}

package train

import (
	"fmt"
	"slices"
)

// presets holds the fixed tensor sets, by name.
var presets = map[string]func() []Spec{
	"bench": BenchPreset,
}

// Presets returns the names of the fixed tensor sets, sorted.
func Presets() []string {
	var names []string
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns the fixed tensor set called name.
func Preset(name string) ([]Spec, error) {
	f, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown preset %q: expected one of %v", name, Presets())
	}
	return f(), nil
}

// BenchPreset returns the kernel benchmarks' set: eight tensors of 1 to 10
// million nonzeros, one per structure class, derived from the larger
// SuiteSparse matrices with parameters fixed here so that every machine
// benchmarks the same tensors. docs/generate.md lists their dims and nnz.
//
//   - stacked3: 16 slices of bcsstk33 (a stiffness matrix), each keeping 80%
//     of the rows and columns, 2% of them relabelled: similar slices with
//     the mesh's locality.
//   - banded3: 64 copies of bcsstk15 (bandwidth 437), each shifted 24 along
//     the diagonal: a band in every pair of modes.
//   - powerlaw3: ca-GrQc (a collaboration network, power-law degrees)
//     lifted into 1000 slices, about 200 of them non-empty with Zipf(1)
//     sizes.
//   - kg3: a knowledge-graph-like entity x relation x entity tensor: the
//     heavy-tailed graph vsp_sctap1-2b_and_seymourl (40174 nodes, largest
//     degree 1714, mean 7) lifted into 20 relations with Zipf(1.2) sizes.
//   - temporal3: ct2010 (a census-block adjacency graph) over 365 time
//     steps, each edge occurring about 12 times in bursts around 24 shared
//     event times.
//   - shuffled3: 8 slices of net25, each keeping 90% of the rows and
//     columns, all of them relabelled at random: the same degrees as the
//     matrix, no locality.
//   - tkg4: a temporal knowledge graph, entity x relation x entity x time:
//     vsp_befref_fxm_2_4_air02 lifted into 16 relations, then in bursts
//     over 100 time steps.
//   - banded4: 8 diagonal-shifted copies of cage10 lifted by a dense
//     6-vector (an exact outer product).
func BenchPreset() []Spec {
	stage := func(gen string, p Params) Stage { return Stage{Generator: gen, Params: p} }
	return []Spec{
		{Name: "bench_stacked3_bcsstk33", Source: "bcsstk33.mtx", Seed: 101, TargetNNZ: 6_000_000,
			Stages: []Stage{stage(GenSlices, Params{Size: 16, Frac: 0.8, Shuffle: 0.02})}},
		{Name: "bench_banded3_bcsstk15", Source: "bcsstk15.mtx", Seed: 102, TargetNNZ: 7_500_000,
			Stages: []Stage{stage(GenBand, Params{Size: 64, Frac: 1, Step: 24})}},
		{Name: "bench_powerlaw3_ca-GrQc", Source: "ca-GrQc.mtx", Seed: 103, TargetNNZ: 3_000_000,
			Stages: []Stage{stage(GenLift, Params{Size: 1000, Zipf: 1})}},
		{Name: "bench_kg3_vsp_sctap1-2b_and_seymourl", Source: "vsp_sctap1-2b_and_seymourl.mtx", Seed: 104, TargetNNZ: 2_500_000,
			Stages: []Stage{stage(GenLift, Params{Size: 20, At: 2, Zipf: 1.2})}},
		{Name: "bench_temporal3_ct2010", Source: "ct2010.mtx", Seed: 105, TargetNNZ: 4_000_000,
			Stages: []Stage{stage(GenBursts, Params{Size: 365, Bursts: 24, Width: 2, Zipf: 1.5})}},
		{Name: "bench_shuffled3_net25", Source: "net25.mtx", Seed: 106, TargetNNZ: 2_600_000,
			Stages: []Stage{stage(GenSlices, Params{Size: 8, Frac: 0.9, Shuffle: 1})}},
		{Name: "bench_tkg4_vsp_befref_fxm_2_4_air02", Source: "vsp_befref_fxm_2_4_air02.mtx", Seed: 107, TargetNNZ: 4_000_000,
			Stages: []Stage{
				stage(GenLift, Params{Size: 16, Support: 16, At: 2, Zipf: 1}),
				stage(GenBursts, Params{Size: 100, Width: 1.5, Zipf: 1.5}),
			}},
		{Name: "bench_banded4_cage10", Source: "cage10.mtx", Seed: 108, TargetNNZ: 7_200_000,
			Stages: []Stage{
				stage(GenBand, Params{Size: 8, Frac: 1, Step: 128}),
				stage(GenLift, Params{Size: 6, Grow: 6}),
			}},
	}
}

#!/bin/bash
# verify.sh checks, on a lent GPU machine, that what the engine computes
# with the GPU is right, and times CP-ALS with and without it (docs/gpu.md,
# "A seventh lease"). It runs there from the repository root, with the
# folder gpu/ carried, and reads:
#
#   gpu/setup.sh       docs/lease/setup.sh, which this script sources
#   gpu/sparsetune.gz  the binary, built here with CGO_ENABLED=0 and gzipped
#   gpu/mats.tgz       the source matrices (tar czf of ../shared/data/suitesparse)
#   gpu/cuda.test      optional: hetero/cuda's test binary, run first
#
# It rebuilds the bench tensors (gen --preset bench) and writes to $OUT:
#
#   verify.jsonl  for each tensor, op (ttm, mttkrp), mode ($MODES, default
#                 "1 2") and split ($SPLITS, default "acc peak dynamic"):
#                 `OP T --mode M --devices cpu,$DEV --split S --verify
#                 --json`, one line {"t","op","mode","split","rc","rows"};
#                 rc is the command's exit status (1 when --verify fails);
#   cpd.jsonl     for the tensors in $CPD (default the two largest; CPD=""
#                 runs none), CP-ALS
#                 at rank $RANK (default 32) for $ITERS iterations (default
#                 30, no tolerance): on the CPU alone, then through the
#                 engine with --devices $DEV, cpu,$DEV (peak) and cpu,$DEV
#                 --split dynamic; one line {"t","how","rows"}.
#
# It stops starting work when BUDGET seconds (default 400) have passed.
set -u -o pipefail
. "$(dirname "$0")/setup.sh" 400
DEV=${DEV:-cuda:0}
t=$(date +%s)
./sparsetune gen --from mats --out bench --preset bench > /dev/null 2> gen.err || tail -3 gen.err
echo "gen: $(($(date +%s) - t)) s"
for T in bench/*.stb; do
	for op in ttm mttkrp; do
		for mode in ${MODES:-1 2}; do
			for split in ${SPLITS:-acc peak dynamic}; do
				[ "$(date +%s)" -lt "$end" ] || break 4
				json_line t="$T" op="$op" mode="$mode" split="$split" ./sparsetune "$op" "$T" --mode "$mode" --devices "cpu,$DEV" --split "$split" --verify --json >> "$OUT/verify.jsonl"
			done
		done
	done
	echo "$T: $(($(date +%s) - t0)) s"
done
echo "verify: $(grep -c '"rc":0' "$OUT/verify.jsonl") of $(wc -l < "$OUT/verify.jsonl") runs within the tolerance"
for T in ${CPD-bench/bench_banded3_bcsstk15.stb bench/bench_banded4_cage10.stb}; do
	args=("$T" --rank "${RANK:-32}" --iters "${ITERS:-30}" --tol 0 --json)
	for how in cpu "$DEV" "cpu,$DEV" dynamic; do
		[ "$(date +%s)" -lt "$end" ] || break 2
		case $how in
		cpu) json_line t="$T" how=cpu ./sparsetune cpd "${args[@]}" ;;
		dynamic) json_line t="$T" how="cpu,$DEV dynamic" ./sparsetune cpd "${args[@]}" --devices "cpu,$DEV" --split dynamic ;;
		*) json_line t="$T" how="$how" ./sparsetune cpd "${args[@]}" --devices "$how" ;;
		esac >> "$OUT/cpd.jsonl"
	done
	echo "cpd $T: $(($(date +%s) - t0)) s"
done

#!/bin/bash
# cost.sh measures, on a lent GPU machine, what a decision costs next to the
# kernel it chooses for (issue 16; docs/gpu.md, "What a decision costs on a
# lease"), on the CPU of that machine and on its GPU. It runs there from the
# repository root, with the folder gpu/ carried, and reads:
#
#   gpu/setup.sh       docs/lease/setup.sh, which this script sources
#   gpu/sparsetune.gz  the binary, built here with CGO_ENABLED=0 and gzipped
#   gpu/mats.tgz       the source matrices (tar czf of ../shared/data/suitesparse)
#   gpu/cuda.test      optional: hetero/cuda's test binary, run first
#   gpu/sel.jsonl      optional: gen manifest lines of further tensors to time
#
# It rebuilds the tensors (gen --manifest, then gen --preset bench), and for
# each tensor, device ($DEVICES, default "cpu cuda:0") and op:
#
#   pred.jsonl    R1 (default 5) fresh `predict --mode 1` processes and
#                 RA (default 3) of `--mode all`, each line {"t","dev","op",
#                 "mode","rc","rows"} with rows as predict --json printed
#                 them (null where the command failed, rc its status);
#   bench.jsonl   `bench --mode 1 --iters 10` of every format, one line
#                 {"t","dev","op","rc","rows"};
#   engine.jsonl  `mttkrp --devices DEV --repeat 5 --json`, the engine's own
#                 predict_seconds beside its kernel, one line {"t","dev","rc","rows"}.
#
# It stops starting tensors when BUDGET seconds (default 500) have passed.
set -u -o pipefail
. "$(dirname "$0")/setup.sh" 500
t=$(date +%s)
if [ -s sel.jsonl ]; then
	./sparsetune gen --from mats --out ho --manifest sel.jsonl > /dev/null 2> gen.err || tail -3 gen.err
fi
./sparsetune gen --from mats --out bench --preset bench > /dev/null 2> gen.err || tail -3 gen.err
echo "gen: $(($(date +%s) - t)) s"
for T in bench/*.stb $(ls ho/*.stb 2> /dev/null); do
	[ "$(date +%s)" -lt "$end" ] || { echo "budget spent before $T"; break; }
	for dev in ${DEVICES:-cpu cuda:0}; do
		for op in mttkrp ttm; do
			for i in $(seq "${R1:-5}"); do
				json_line t="$T" dev="$dev" op="$op" mode=1 ./sparsetune predict "$T" --op "$op" --mode 1 --device "$dev" --json >> "$OUT/pred.jsonl"
			done
			for i in $(seq "${RA:-3}"); do
				json_line t="$T" dev="$dev" op="$op" mode=all ./sparsetune predict "$T" --op "$op" --mode all --device "$dev" --json >> "$OUT/pred.jsonl"
			done
			json_line t="$T" dev="$dev" op="$op" ./sparsetune bench "$T" --op "$op" --mode 1 --iters 10 --probe=false --device "$dev" --json >> "$OUT/bench.jsonl"
		done
		json_line t="$T" dev="$dev" ./sparsetune mttkrp "$T" --devices "$dev" --repeat 5 --json >> "$OUT/engine.jsonl"
	done
	echo "$T: $(($(date +%s) - t0)) s"
done
echo "done after $(($(date +%s) - t0)) s"

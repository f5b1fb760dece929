#!/bin/bash
# threads.sh times MTTKRP along mode 1 in every format on a lent machine's
# host CPU at several thread counts (docs/gpu.md, "A sixth lease"), to tell
# apart what the thread count changes in the labels from what the machine
# does. It runs there from the repository root, with the folder gpu/ carried
# as cost.sh has it (setup.sh, sparsetune.gz, mats.tgz, sel.jsonl), rebuilds the same
# tensors, and appends one line {"t","threads","rows"} per tensor and thread
# count to $OUT/threads.jsonl, rows as bench --json prints them. It stops
# when BUDGET seconds (default 200) have passed.
set -u -o pipefail
TESTS=0 . "$(dirname "$0")/setup.sh" 200
if [ -s sel.jsonl ]; then
	./sparsetune gen --from mats --out ho --manifest sel.jsonl > /dev/null 2>&1
fi
./sparsetune gen --from mats --out bench --preset bench > /dev/null 2>&1
echo "gen $(($(date +%s) - t0)) s"
for th in ${THREADS_LIST:-2 16}; do
	for T in bench/*.stb $(ls ho/*.stb 2> /dev/null); do
		[ "$(date +%s)" -lt "$end" ] || { echo "budget spent at $th threads, $T"; break 2; }
		out=$(./sparsetune bench "$T" --op mttkrp --mode 1 --iters 10 --probe=false --threads "$th" --json 2> /dev/null | tr -d '\n') &&
			echo "{\"t\":\"$T\",\"threads\":$th,\"rows\":$out}" >> "$OUT/threads.jsonl"
	done
	echo "threads $th done at $(($(date +%s) - t0)) s"
done

#!/bin/bash
# label.sh labels tensors on a lent GPU machine (docs/gpu.md, "Labelling on
# a lease"). It runs there from the repository root, with the folder gpu/
# carried, and reads:
#
#   gpu/setup.sh       docs/lease/setup.sh, which this script sources
#   gpu/sparsetune.gz  the binary, built here with CGO_ENABLED=0 and gzipped
#   gpu/cuda.test      optional: hetero/cuda's test binary, run first
#   gpu/mats.tgz       the source matrices (tar czf of ../shared/data/suitesparse)
#   gpu/jobs           one labelling run per line: SET MANIFEST LABELS OPS,
#                      e.g. "trainset gpu/sel.jsonl ttm-cuda.jsonl ttm";
#                      MANIFEST is relative to the repository root
#   gpu/prev/*.jsonl   optional: labels files of an earlier call, resumed
#
# Each SET is rebuilt with gen --manifest (checked against its lines),
# then labelled on $DEVICE (default cuda:0) until BUDGET seconds (default
# 500) have passed since the start. The labels files are written beside
# the sets, so their rows name tensors as SET/FILE, and copied to $OUT
# after each run; a run cut short by the budget resumes in the next call
# once its files are put in gpu/prev.
set -u
. "$(dirname "$0")/setup.sh" 500
# time_left STEP sets left to the seconds the budget still holds, and
# fails, saying so, when they are too few for STEP.
time_left() {
	left=$((end - $(date +%s)))
	[ "$left" -gt 5 ] || { echo "$1: no time left"; return 1; }
}
mkdir -p w && cd w || exit 1
cp ../prev/*.jsonl . 2>/dev/null
while read -r set manifest labels ops; do
	[ -n "$set" ] && [ "${set#\#}" = "$set" ] || continue
	# gen too stops at the budget: a set of large tensors can take minutes.
	time_left "gen $set" || continue
	timeout "$left" ../sparsetune gen --from ../mats --out "$set" --manifest "../../$manifest" > /dev/null 2> gen.err ||
		{ echo "gen $set failed or ran out of time:"; tail -3 gen.err; continue; }
	time_left "label $set" || continue
	t=$(date +%s)
	timeout "$left" ../sparsetune label --in "$set" --out "$labels" --ops "$ops" --devices "${DEVICE:-cuda:0}" >> "$OUT/label-log.txt" 2>&1
	echo "label $set $ops: rc $? in $(($(date +%s) - t)) s; $(wc -l < "$labels") rows in $labels"
	cp "$labels" "$OUT/"
done < ../jobs
echo "done after $(($(date +%s) - t0)) s"

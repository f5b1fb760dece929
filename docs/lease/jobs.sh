#!/bin/bash
# jobs.sh writes label.sh's job list (gpu/jobs) for a labelling that a
# lease may cut short: the tensors of one or more gen manifests, in a
# seeded random order, in chunks of SIZE tensors, each chunk one job line
# per set it draws from. label.sh runs the lines in order, building each
# chunk's tensors just before labelling them, so wherever the budget ends
# the rows done are a uniform sample of the tensors asked for, and no time
# went into building tensors that were not labelled (docs/gpu.md,
# "Labelling on a lease"). Run here, from the repository root:
#
#   bash docs/lease/jobs.sh OPS SIZE SEED SET=MANIFEST...
#
# e.g. bash docs/lease/jobs.sh mttkrp 150 52 trainset=gpu/sel.jsonl \
#          trainset-large=gpu/sel-large.jsonl
#
# writes gpu/chunkNN-SET.jsonl (manifest lines) and gpu/jobs, whose lines
# label into OPS-SET.jsonl (OPS with "-" for ","). Chunks a call did not
# reach are resumed by a jobs file of the lines from the first unfinished
# chunk on (label.sh skips the rows already in gpu/prev's labels files).
set -eu -o pipefail
[ $# -ge 4 ] || { sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 2; }
ops=$1 size=$2 seed=$3
shift 3
[[ $size =~ ^[1-9][0-9]*$ ]] || { echo "jobs.sh: SIZE $size: want a whole number of tensors, at least 1" >&2; exit 2; }
[[ $ops =~ ^(ttm|mttkrp)(,(ttm|mttkrp))?$ ]] || { echo "jobs.sh: OPS $ops: want ttm, mttkrp or both, comma-separated" >&2; exit 2; }
mkdir -p gpu
rm -f gpu/chunk[0-9]*-*.jsonl
for pair in "$@"; do
	set_=${pair%%=*} manifest=${pair#*=}
	[ "$set_" != "$pair" ] && [ -s "$manifest" ] || { echo "jobs.sh: $pair: want SET=MANIFEST, a manifest that is not empty" >&2; exit 2; }
	awk -v s="$set_" '{print s "\t" $0}' "$manifest"
done | shuf --random-source=<(yes "$seed") | awk -F'\t' -v size="$size" -v ops="$ops" -v stem="${ops//,/-}" '
	{
		chunk = sprintf("%02d", int((NR - 1) / size) + 1)
		file = "gpu/chunk" chunk "-" $1 ".jsonl"
		if (!(file in seen)) {
			seen[file] = 1
			print $1, file, stem "-" $1 ".jsonl", ops > "gpu/jobs"
		}
		sub(/^[^\t]*\t/, "")
		print > file
	}'
echo "jobs.sh: $(wc -l < gpu/jobs) job lines, $(cat gpu/chunk[0-9]*-*.jsonl | wc -l) tensors"

# setup.sh is sourced by the lease scripts (label.sh, cost.sh, threads.sh),
# copied beside them into gpu/, from the repository root on the lent
# machine. It starts the log in $OUT, sets t0 and end (t0 plus BUDGET
# seconds, default $1), enters gpu/, unpacks the binary and the matrices,
# finds NVRTC, runs hetero/cuda's test binary when gpu/cuda.test is
# there (TESTS=0 skips it), and defines json_line.
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
end=$((t0 + ${BUDGET:-$1}))
date -u
cd gpu || exit 1
[ -x sparsetune ] || { gunzip -kf sparsetune.gz && chmod +x sparsetune; } || exit 1
[ -d mats ] || { mkdir -p mats && tar xzf mats.tgz -C mats; } || exit 1
# NVRTC: CUDA's own, else the one the image's Python packages carry.
for f in /usr/local/cuda/lib64/libnvrtc.so* /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib/libnvrtc.so*; do
	[ -e "$f" ] && { export SPARSETUNE_NVRTC_LIB=$f; break; }
done
echo "NVRTC: ${SPARSETUNE_NVRTC_LIB:-the default search}"
nproc
lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
./sparsetune devices
if [ -x cuda.test ] && [ "${TESTS:-1}" = 1 ]; then
	SPARSETUNE_GPU_TESTS=1 timeout 60 ./cuda.test -test.v > "$OUT/cuda-test.txt" 2>&1
	echo "cuda.test: rc $?, $(grep -c '^--- PASS' "$OUT/cuda-test.txt") passed"
	grep '^--- FAIL\|^FAIL' "$OUT/cuda-test.txt"
fi
# json_line KEY=VALUE... COMMAND... runs COMMAND and prints one JSON line
# with the string fields given, its exit status and its output as "rows".
json_line() {
	local fields=""
	while [[ $1 == *=* ]]; do
		fields="$fields\"${1%%=*}\":\"${1#*=}\","
		shift
	done
	local out rc
	out=$("$@" 2> json_line.err | tr -d '\n')
	rc=$?
	[ -n "$out" ] || out=null
	[ "$rc" = 0 ] || { echo "rc $rc: $*" >&2; tail -2 json_line.err >&2; }
	echo "{${fields}\"rc\":$rc,\"rows\":${out}}"
}

#!/usr/bin/env bash
# The preflight's first run on a real GPU, as one prepared command (issue 13): the preflight once, then four
# one-line probes. Everything lands under $OUT (default ./gpu-probe); nothing here is needed by CI.
#
#   OUT=/some/folder WORLD_SIZE=1 PYTHON=python3 bash bench/gpu_probe.sh
#
# 1. parent context: is the launcher's own PID ever listed on a card while the preflight runs?
# 2. Triton compile: a first torch.compile on the card with an empty cache (needs gcc and Python headers).
# 3. recompiles under FSDP2: TORCH_LOGS=recompiles over a sharded compiled run of the rank checks.
# 4. the node as nvidia-smi sees it: NVLink status, fabric state, idle memory.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-probe}
PY=${PYTHON:-python3}
N=${WORLD_SIZE:-1}
mkdir -p "$OUT"

echo "== preflight (--world-size $N)"
$PY -m provisioning.preflight --device cuda --world-size "$N" --json "$OUT/h200.json" >"$OUT/preflight.txt" 2>&1 &
launcher=$!
: >"$OUT/probe-parent-context.txt"
while kill -0 "$launcher" 2>/dev/null; do
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader >>"$OUT/probe-parent-context.txt" 2>&1
  sleep 2
done
wait "$launcher"
echo "exit $?" >>"$OUT/preflight.txt"
tail -n 25 "$OUT/preflight.txt"
if grep -q "^$launcher," "$OUT/probe-parent-context.txt"; then
  echo "probe 1: the launcher (pid $launcher) held a CUDA context"
else
  echo "probe 1: the launcher (pid $launcher) never appeared on a card"
fi

echo "== probe 2: Triton's first compile"
TRITON_CACHE_DIR=$(mktemp -d) TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 300 $PY -c '
import time, torch
started = time.perf_counter()
f = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)
y = f(torch.randn(1024, device="cuda"))
torch.cuda.synchronize()
print(f"probe 2: compiled and ran in {time.perf_counter() - started:.1f} s, finite={bool(torch.isfinite(y).all())}")
' 2>&1 | tail -n 3 | tee "$OUT/probe-triton.txt"

echo "== probe 3: recompiles under FSDP2"
# The profile stays out of $OUT (the device tool brings back 8 files at most); empty caches make it a cold compile.
profile=$(mktemp --suffix=.json)
printf '{"shard": true, "compile": true, "checks": ["load", "forward", "backward", "step_time"]}' >"$profile"
TRITON_CACHE_DIR=$(mktemp -d) TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TORCH_LOGS=recompiles timeout 420 \
  $PY -m provisioning.preflight --device cuda --world-size "$N" \
  --json "$OUT/fsdp-report.json" --profile "$profile" >"$OUT/probe-recompiles.txt" 2>&1
echo "probe 3: $(grep -c 'Recompiling' "$OUT/probe-recompiles.txt") recompilations logged"

echo "== probe 4: the node"
{
  nvidia-smi nvlink --status
  nvidia-smi --query-gpu=index,name,compute_cap,fabric.state,fabric.status,memory.used,memory.total --format=csv
} >"$OUT/probe-node.txt" 2>&1
cat "$OUT/probe-node.txt" | tail -n 12

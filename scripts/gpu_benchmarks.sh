#!/usr/bin/env bash
# On a machine with a GPU, every measurement that needs one, each step under a time limit of its own so that
# one failure or a slow step loses nothing else:
#   the benchmark rows at the CPU's sizes and at a GPU's (--large), training steps of the English recipe,
#   flash attention's tiled path against SDPA, its two loop orders, scripts/cuda_check.py and the library tests there.
#
#     scripts/gpu_benchmarks.sh OUT_DIR
#
# Everything printed goes to OUT_DIR/log.md; the JSON files to OUT_DIR/results.tgz. The English text is
# WordNet's (Debian's wordnet-base in /usr/share/wordnet); where the machine has no packages, bring its four
# data files along (tar of data.noun data.verb data.adj data.adv) and name the tar in WORDNET_TAR.
set -u
out=${1:?usage: scripts/gpu_benchmarks.sh OUT_DIR}
mkdir -p "$out" /tmp/gpu-results
export PYTHONUNBUFFERED=1 PYTHONPATH=.
log="$out/log.md"
if [ -n "${WORDNET_TAR:-}" ]; then mkdir -p /usr/share/wordnet && tar xJf "$WORDNET_TAR" -C /usr/share/wordnet; fi
step() {  # step SECONDS TITLE COMMAND...
  local limit=$1 title=$2; shift 2
  echo -e "\n## $title\n\n\`$*\`\n" >>"$log"
  local started=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  echo -e "\n(exit $?, $((SECONDS - started)) s)" >>"$log"
}
{ nvidia-smi -L; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } >>"$log" 2>&1
for group in 1,2,3 1b,2b,3b 4 8 9 6,7 5; do
  step 90 "rows $group, the CPU's sizes, on the GPU" python3 -m benchmarks.run --device cuda --only "$group" --out "/tmp/gpu-results/full-$group.json"
done
step 90 "English training steps on the GPU" python3 -m benchmarks.train_step --device cuda --out /tmp/gpu-results/train_step.json
step 90 "flash attention: explicit, SDPA and tiled" python3 -m benchmarks.flash_memory --lengths 1024 2048 4096 8192 16384
step 120 "flash attention: FlashAttention 1's loop order against 2's" python3 -m benchmarks.flash_loop_order --lengths 1024 2048 4096 8192
for group in 1b,2b,3b 1,2,3 8 9 4 6,7; do
  step 120 "rows $group, a GPU's sizes" python3 -m benchmarks.run --device cuda --large --only "$group" --out "/tmp/gpu-results/large-$group.json"
done
tar czf "$out/results.tgz" -C /tmp gpu-results
step 200 "CUDA check" python3 scripts/cuda_check.py
step 90 "library tests" python3 -m pytest -q -p no:cacheprovider tests/test_attention.py tests/test_generation.py \
  tests/test_kv_heads.py tests/test_masks.py tests/test_moe.py tests/test_positions.py tests/test_presets.py \
  tests/test_hooks.py tests/test_flash.py
step 120 "rows 5, a GPU's sizes" python3 -m benchmarks.run --device cuda --large --only 5 --out /tmp/gpu-results/large-5.json
tar czf "$out/results.tgz" -C /tmp gpu-results

#!/usr/bin/env bash
# One prepared GPU run: the 1b config at seq 2048 in bf16, XLA attention vs cuDNN flash attention.
# Usage: OUT=results_dir bash bench/gpu_1b.sh   (uses whatever python3 has jax with CUDA)
set -u
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.92
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import jax, flax, optax; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, jax.devices())"
run() { name=$1; shift; timeout 170 python3 bench/train_step.py --size 1b --seq 2048 --steps 5 --output "$OUT/train_step_1b_gpu_$name.json" "$@" 2>&1 | grep -vE "^\s*$" | tail -9; }
run cudnn_b8 --batch 8 --attention cudnn
run xla_b8 --batch 8 --attention xla
run cudnn_b16 --batch 16 --attention cudnn
# Sampling: 1b, 200 samples of one prompt x 512 new tokens; tokens/s and achieved HBM bandwidth.
timeout 300 python3 bench/sample_throughput.py --size 1b --prompts 1 --samples 200 --new_tokens 512 \
    --output "$OUT/sample_throughput_1b_gpu.json" 2>&1 | grep -vE "^\s*$" | tail -9

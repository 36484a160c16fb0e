#!/usr/bin/env bash
# The device checks (docs/gpu.md) on a machine with an NVIDIA GPU, from binaries built on
# another machine (the GPU machine has no Rust toolchain and no network):
#
#   scripts/gpu-check.sh stage [DIR]   # here: build and copy what travels to DIR (.gpu)
#   scripts/gpu-check.sh run [DIR]     # there: run it, logs under $OUT (or /tmp/gpu-check)
#   GPU_CHECK_STEPS="1 2" scripts/gpu-check.sh run   # only some of the steps below
#   GPU_CHECK_BENCH='apply/cuda/' ...                # step 2's criterion filter
#
# `run` does, each step under its own time limit:
#   1. tests/device_conformance.rs on CUDA and on the GPU's Vulkan adapter
#      (wgpu): every case bit-identical to CpuDevice;
#   2. `cargo bench --bench apply` (the prebuilt bench binary) on CUDA and wgpu,
#      on the masks GPU_CHECK_MASKS names (APPLY_MASKS; default
#      structured,iid0.05,real: the apply bench's, scattered, recorded);
#   3. benches/torch_masked_fill.py: the device-to-device copy ceiling, PyTorch's
#      masked_fill_ and, if a wheel is in .whl/, XGrammar's apply kernel;
#   4. examples/cuda_step.rs: fill on the CPU, apply on the GPU, one step timed;
#   5. ncu (if there) on one launch of the largest f32 shape, and on the
#      one-row launches of step 4;
#   6. `tokensieve generate --device cuda` with the real model, when
#      GPU_CHECK_MODEL names its .gguf there (the 98 MB model is over what one
#      device call carries: send it in parts over two calls to one warm
#      machine and join them there);
#   7. benches/cuda_kernel_variants.py (CuPy): the committed kernel's own rate
#      at batch >= 128 in CUDA graphs, without the host's launch cost, on
#      every kind of mask beside PyTorch's masked fill and (with the wheel in
#      .whl/) XGrammar's kernel (GPU_CHECK_VARIANTS=all times every variant
#      tried, ~2 minutes);
#   8. with a `cuda` wheel in DIR (`stage` builds one where maturin is at
#      hand): crates/python/tests/test_cuda.py and benches/python_cuda_apply.py.
# The Vulkan loader travels as .deb files in .gl/ (libvulkan1 and libglvnd's
# libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2: NVIDIA's ICD needs
# libGLdispatch), XGrammar's wheel (optional) in .whl/; the driver's Vulkan
# ICD and NVRTC come from the GPU machine. With the device tool (2026-11):
# run `scripts/gpu-check.sh run` carrying [".gl", ".whl", ".gpu"]; steps 1-5
# took 90 s on an H200 (2026-11-26), steps 1-5 and 7 with every variant about
# 3 minutes (2026-11-28). The tool brings back at most 8 files from $OUT: point
# OUT elsewhere and pack that folder into one archive under the real $OUT.
# Step 6's CLI is staged with the rest (17 MB stripped); its model travels
# apart, in parts (over one call's 64 MiB). With the wheel (12 MB) .gpu/ is
# about 58 MB: move the CLI out for a call that skips step 6.
set -uo pipefail
cmd=${1:-}
dir=${2:-.gpu}

stage() {
    set -e
    cargo test --release --features cuda,wgpu --test device_conformance --no-run
    cargo bench --features cuda,wgpu --bench apply --no-run
    cargo build --release --features cuda --example cuda_step
    cargo build --release -p tokensieve-cli --features cuda
    mkdir -p "$dir"
    local t
    t=$(cargo test --release --features cuda,wgpu --test device_conformance --no-run 2>&1 |
        sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)
    cp "$t" "$dir/device_conformance"
    t=$(cargo bench --features cuda,wgpu --bench apply --no-run 2>&1 |
        sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)
    cp "$t" "$dir/apply"
    cp target/release/examples/cuda_step "$dir/cuda_step"
    cp target/release/tokensieve "$dir/tokensieve"
    strip "$dir"/device_conformance "$dir"/apply "$dir"/cuda_step "$dir"/tokensieve
    # Compressed (17 MB to 1.7 MB): a device call carries 64 MiB in all.
    xz -9 -c ../shared/data/tokenizers/llama3/tokenizer.json >"$dir/llama3.json.xz"
    # Step 8's wheel, where maturin is at hand (scripts/python-test.sh puts
    # one in target/py-venv).
    local maturin
    maturin=$(command -v maturin || ls target/py-venv/bin/maturin 2>/dev/null || true)
    if [ -n "$maturin" ]; then
        local py="$(dirname "$maturin")/python3"
        [ -x "$py" ] || py=python3
        "$maturin" build --release --features cuda --manifest-path crates/python/Cargo.toml \
            --interpreter "$py" --out "$dir"
    else
        echo "no maturin: step 8's wheel not built (run scripts/python-test.sh once first)"
    fi
    ls -la "$dir"
}

run() {
    local out=${OUT:-/tmp/gpu-check}
    mkdir -p "$out"
    for f in .gl/*.deb; do [ -e "$f" ] && dpkg -x "$f" /; done
    ldconfig
    local icd
    for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
        /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
        if [ -e "$icd" ]; then export VK_DRIVER_FILES=$icd; break; fi
    done
    # NVRTC: the toolkit's, else the one in PyTorch's wheels.
    local lib
    lib=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null |
        while read -r d; do ls "$d"/libnvrtc.so* >/dev/null 2>&1 && echo "$d"; done | head -1)
    if [ -z "$lib" ]; then
        lib=$(dirname "$(find / -name 'libnvrtc.so*' -not -path '/proc/*' 2>/dev/null | head -1)")
    fi
    export LD_LIBRARY_PATH=${lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,ecc.mode.current,pstate --format=csv
        echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-none} nvrtc=$lib"
        ldconfig -p | grep -E "libvulkan|libGLX_nvidia|libGLdispatch|libnvidia-gpucomp" | head
        [ -n "${VK_DRIVER_FILES:-}" ] && cat "$VK_DRIVER_FILES"
        nvcc --version 2>/dev/null | tail -2
    } 2>&1 | tee "$out/gpu.txt"

    [ -e "$dir/llama3.json" ] || python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' \
        "$dir/llama3.json.xz" >"$dir/llama3.json"
    want() { [[ " ${GPU_CHECK_STEPS:-1 2 3 4 5 6 7 8} " == *" $1 "* ]]; }
    if want 1; then
        echo "== 1. device conformance"
        VK_LOADER_DEBUG=error timeout 180 "$dir/device_conformance" --test-threads=1 --nocapture 2>&1 |
            tee "$out/conformance.log" | grep -E "skipped|test result|FAILED|panicked|mismatch|adapter|cases|ERROR|error" | head -40
    fi
    if want 2; then
        echo "== 2. cargo bench --bench apply (cuda, wgpu)"
        APPLY_MASKS=${GPU_CHECK_MASKS:-structured,iid0.05,real} APPLY_REAL_MASKS=benches/fixtures/masks \
            timeout 300 "$dir/apply" --bench "${GPU_CHECK_BENCH:-apply/(cuda|wgpu)/.*b(1|128|4096)_}" >"$out/bench.log" 2>&1
        echo "bench rc $?"
        awk '/^apply\// {name = $1} /thrpt:/ {print name, $0}' "$out/bench.log"
        grep -E "skipped|bench on" "$out/bench.log"
    fi
    if want 3; then
        echo "== 3. PyTorch masked_fill_ and XGrammar"
        local wheel
        wheel=$(ls .whl/xgrammar-*.whl 2>/dev/null | head -1)
        PYTHONUNBUFFERED=1 timeout 240 python3 benches/torch_masked_fill.py --json "$out/torch.jsonl" \
            ${wheel:+--xgrammar-wheel "$wheel"} 2>&1 | tee "$out/torch.log"
    fi
    if want 4; then
        echo "== 4. one decoding step: fill on the CPU, apply on the GPU"
        for schema in crates/cli/testdata/person.schema.json; do
            timeout 60 "$dir/cuda_step" "$dir/llama3.json" "$schema" earley 256 2>&1 | tee -a "$out/step.log"
            timeout 60 "$dir/cuda_step" "$dir/llama3.json" "$schema" regex-fsm 256 2>&1 | tee -a "$out/step.log"
        done
    fi
    if want 5; then
        echo "== 5. ncu on the largest f32 launch"
        if command -v ncu >/dev/null; then
            timeout 120 ncu --clock-control none -k regex:apply_bitmask -c 1 \
                --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
                "$dir/apply" --bench 'apply/cuda/f32/b4096_v151936' >"$out/ncu.txt" 2>&1
            grep -E "Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers|L2 Hit|Mem Busy|Max Bandwidth" "$out/ncu.txt" | head -20
            echo "-- ncu: one row of 128,256 f32 logits (examples/cuda_step)"
            timeout 60 ncu --clock-control none -k regex:apply_bitmask -c 4 --section SpeedOfLight \
                "$dir/cuda_step" "$dir/llama3.json" crates/cli/testdata/person.schema.json earley 8 \
                >"$out/ncu-step.txt" 2>&1
            grep -E "Duration" "$out/ncu-step.txt"
        fi
    fi
    if want 6; then
        echo "== 6. tokensieve generate --device cuda (the real model)"
        if [ -n "${GPU_CHECK_MODEL:-}" ] && [ -s "$GPU_CHECK_MODEL" ]; then
            local be dev
            for be in earley regex-fsm; do
                for dev in cpu cuda; do
                    echo "-- $be on $dev" | tee -a "$out/generate.log"
                    timeout 60 "$dir/tokensieve" generate --model "$GPU_CHECK_MODEL" --backend "$be" \
                        --device "$dev" --schema crates/cli/testdata/person.schema.json \
                        "Describe a fictional person as JSON: name, age, city, and whether they are a student." \
                        2>&1 | tee -a "$out/generate.log"
                done
            done
        else
            echo "skipped: set GPU_CHECK_MODEL to the model's .gguf on this machine"
        fi
    fi
    if want 7; then
        echo "== 7. the kernel's own rate (CUDA graphs; benches/cuda_kernel_variants.py)"
        if [ "${GPU_CHECK_VARIANTS:-}" = all ]; then
            PYTHONUNBUFFERED=1 OUT=$out timeout 240 python3 benches/cuda_kernel_variants.py 2>&1 | tee "$out/variants.log"
        else
            local xw
            xw=$(ls .whl/xgrammar-*.whl 2>/dev/null | head -1)
            PYTHONUNBUFFERED=1 OUT=$out VAR_ONLY=committed,t1cs VAR_BATCHES=128,4096 VAR_PEERS=1 \
                VAR_XGRAMMAR_WHEEL=$xw VAR_MASKS=structured,iid0.001,iid0.05,iid0.1,iid0.25,iid0.5,iid0.95,real \
                timeout 240 python3 benches/cuda_kernel_variants.py 2>&1 | tee "$out/variants.log"
        fi
    fi
    if want 8; then
        echo "== 8. the Python wheel's CUDA apply"
        local wheel
        wheel=$(ls "$dir"/tokensieve-*.whl 2>/dev/null | head -1)
        if [ -n "$wheel" ]; then
            python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/ts-site "$wheel"
            (cd crates/python && PYTHONPATH=/tmp/ts-site timeout 120 python3 -m pytest tests/test_cuda.py -q -rs \
                -p no:cacheprovider 2>&1 | tail -5) | tee "$out/pytest-cuda.log"
            PYTHONPATH=/tmp/ts-site PYTHONUNBUFFERED=1 timeout 90 python3 benches/python_cuda_apply.py \
                --real benches/fixtures/masks/masks-llama3.bin.xz 2>&1 | tee "$out/python-apply.log"
        else
            echo "skipped: no tokensieve-*.whl in $dir"
        fi
    fi
}

case "$cmd" in
stage) stage ;;
run) run ;;
*)
    echo "usage: $0 stage|run [DIR]" >&2
    exit 2
    ;;
esac

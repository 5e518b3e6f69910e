#!/usr/bin/env bash
# Build .venv-hf-container: the library stack of the SageMaker image hf-fastload runs,
#   huggingface-pytorch-inference:2.6.0-transformers4.51.3 (inference toolkit 2.6.0, transformers 4.51.3),
# so tests can prove that an artifact built here loads with the container's versions (systems/images.py
# HF_PYTORCH_INFERENCE; the pins below follow it).
#
# Pins (why):
#   torch 2.13.0        the only torch wheel on this disk without GBs of CUDA downloads (the image has 2.6.0;
#                       the model code in transformers 4.51 is what decides loadability, not torch).
#   transformers 4.51.3, huggingface-hub 0.30.0, accelerate 1.6.0
#                       the image's: aws/deep-learning-containers huggingface/pytorch/inference/docker/2.6/py3/cu124/
#                       Dockerfile.gpu at 6dbb542b45 sets ARG TRANSFORMERS_VERSION=4.51.3, HUGGINGFACE_HUB_VERSION=0.30.0,
#                       ACCELERATE_VERSION=1.6.0 (accelerate: transformers needs it for `low_cpu_mem_usage=True` /
#                       `device_map`, which the hf-fastload handler passes).
#   tokenizers 0.21.1, safetensors 0.5.3
#                       inside transformers 4.51.3's ranges (its METADATA: tokenizers>=0.21,<0.22; safetensors>=0.4.3),
#                       the releases current when 4.51.3 shipped (April 2025); the Dockerfile does not pin them
#                       (unverified which the image resolved).
#   sagemaker-huggingface-inference-toolkit 2.6.0 installed --no-deps (the Dockerfile's
#                       SAGEMAKER_HF_INFERENCE_VERSION=2.6.0): its declared extras-in-disguise (librosa, pyctcdecode,
#                       phonemizer: audio pipelines) are never imported by the handler service; what it imports is
#                       pinned below (sagemaker-inference, retrying, Pillow, numpy, mms).
#   multi-model-server 1.1.11 (+ its deps): the toolkit imports `mms.service` at import time (the Dockerfile's
#                       MMS_VERSION=1.1.11).
#
# Old tokenizers releases, each in its own --target folder under $VENV/old-tokenizers/<version> (imported by
# putting that folder first on sys.path): what the DJL images' transformers pins allow.
#   0.14.1  the only 0.14.x fix release: transformers 4.34.0 (djl-inference 0.24 FasterTransformer image)
#           requires tokenizers<0.15,>=0.14, and 4.39.0 (the 0.27 DeepSpeed image) allows >=0.14 too.
#   0.15.2  the newest release below 0.19: what transformers 4.39.0's tokenizers<0.19,>=0.14 resolves to.
#
# Idempotent: a stamp file holds the hash of this pin list; a second run with the same pins does nothing.
# Usage: tests/systems/hf_container/make_env.sh [VENV_DIR]    (default: <repo>/.venv-hf-container)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="${1:-$REPO/.venv-hf-container}"
# Two test modules may ask for it at once (pytest-xdist): one builds, the other waits for it.
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3

PINS="torch==2.13.0
transformers==4.51.3
tokenizers==0.21.1
huggingface-hub==0.30.0
safetensors==0.5.3
numpy==1.26.4
sagemaker-inference==1.10.1
retrying==1.3.4
Pillow==11.1.0
multi-model-server==1.1.11
model-archiver==1.0.3
psutil==6.1.1
future==1.0.0
accelerate==1.6.0"
NODEPS="sagemaker-huggingface-inference-toolkit==2.6.0"

OLD_TOKENIZERS="0.14.1 0.15.2"

STAMP="$VENV/.pins.sha256"
WANT="$(printf '%s\n%s\n%s\n' "$PINS" "--no-deps" "$NODEPS" | sha256sum | cut -d' ' -f1)"

install_old_tokenizers() {
    # Separate from the stamp: adding a version here must not rebuild the whole venv.
    local version
    for version in $OLD_TOKENIZERS; do
        if [[ ! -f "$VENV/old-tokenizers/$version/tokenizers/__init__.py" ]]; then
            pip_install --no-deps --target "$VENV/old-tokenizers/$version" "tokenizers==$version"
        fi
    done
}

LOG="$VENV/pip-install.log"
pip_install() {
    # Quiet on success; on failure print pip's output (minus the noise about absent local index folders).
    if ! "$VENV/bin/python" -m pip --disable-pip-version-check install "$@" >>"$LOG" 2>&1; then
        grep -v "is ignored: it is neither a file nor a directory" "$LOG" | tail -40 >&2
        echo "make_env.sh: pip install failed (log: $LOG)" >&2
        exit 1
    fi
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/python" ]]; then
    install_old_tokenizers
    echo "hf-container env up to date: $VENV"
    exit 0
fi

start=$(date +%s)
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
pip_install --upgrade "pip>=24" setuptools wheel
# One resolver run: every pin must resolve together (fails loudly on a conflict).
# shellcheck disable=SC2086
pip_install $PINS
# shellcheck disable=SC2086
pip_install --no-deps $NODEPS
# The import the tests rely on; fails the build (and the stamp is not written) if anything is missing.
"$VENV/bin/python" - <<'PY'
import transformers, tokenizers, torch
from sagemaker_huggingface_inference_toolkit.handler_service import HuggingFaceHandlerService  # noqa: F401
assert transformers.__version__ == "4.51.3", transformers.__version__
print(f"ok: transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, torch {torch.__version__}")
PY
install_old_tokenizers
echo "$WANT" > "$STAMP"
echo "built $VENV in $(( $(date +%s) - start )) s"

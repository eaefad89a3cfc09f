"""vLLM's block-FP8 parameters (``Fp8Config`` with ``weight_block_size=[128, 128]``) of a Hugging
Face checkpoint, in numpy: the reference that test_storage.py holds ``refit run --storage framework
--quantize fp8-block128`` to, byte for byte. Written from vLLM's code, independently of refit's.

* Which weights: ``Fp8Config.get_quant_method`` quantises every ``LinearBase`` (the decoder
  layers' ``*_proj`` weights) and ``FusedMoE``'s experts; embeddings, ``lm_head``, norms and the
  MoE router (``quant_config=None``) stay bf16.
* The checkpoint: each quantised weight as ``per_block_cast_to_fp8`` (vllm/utils/deep_gemm.py)
  makes it, fp8 values under its name and the fp32 scales under ``<name>_scale_inv`` (the
  DeepSeek-V3 checkpoint format); tests/quantize/make_vectors.py's ``block128`` computes it.
* Loading: ``Fp8LinearMethod.create_weights`` gives a linear an fp8 ``weight`` and, through
  ``create_fp8_scale_parameter``, a ``BlockQuantScaleParameter`` ``weight_scale_inv`` of
  [ceil(out/128), ceil(in/128)] over the whole fused output; ``Fp8MoEMethod.create_weights`` gives
  ``w13_weight_scale_inv`` [E_local, 2*ceil(I/128), ceil(H/128)] and ``w2_weight_scale_inv``. The
  values load like the bf16 weights; the weight loaders take a scale parameter's shards with
  offsets and sizes divided by the block (``weight_loader_v2`` for BlockQuantScaleParameter,
  ``FusedMoE._load_w13``/``_load_w2`` on the scales' own shape). With every shard a whole number
  of blocks (``validate_fp8_block_shape``), a scale parameter is therefore the bf16 layout
  (framework_reference.vllm_params) applied to the grid of blocks: each scales tensor laid out as
  if it were its weight, with head_dim counted in blocks.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from framework_reference import Model, Params, Vllm, vllm_params

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quantize"))
from make_vectors import BF16, block128  # noqa: E402

BLOCK = 128


def quantised(name: str) -> bool:
    """Fp8Config's LinearBase and FusedMoE weights, by HF name (eh_proj is a plain nn.Linear)."""
    return name.startswith("model.layers.") and name.endswith("_proj.weight") and ".eh_proj." not in name


def finite_weights(sd: Params) -> Params:
    """The bf16 bit patterns with exponents 120..135 (|x| in [2^-7, 2^9)): random bits would put a
    NaN or Inf in nearly every 128x128 block, which makes the whole block NaN."""
    out = dict(sd)
    for name, a in sd.items():
        if a.dtype == np.uint16:
            out[name] = ((a & 0x807F) | ((((a >> 7) & 0xF) + 0x78) << 7)).astype(np.uint16)
    return out


def vllm_fp8_params(sd: Params, m: Model, c: Vllm, first_rank: int) -> dict[int, Params]:
    """The parameters of every inference rank of an FP8 vLLM loading the block-quantised `sd`."""
    values, grid = {}, {}
    for name, a in sd.items():
        if quantised(name):
            q, s = block128(a.view(BF16))
            values[name], grid[name] = q, s.view(np.uint32)
        else:
            values[name] = a
            grid[name] = np.zeros([-(-n // BLOCK) for n in a.shape], dtype=np.uint32)  # laid out, dropped
    assert m.head_dim % BLOCK == 0, "kv heads replicated over TP ranks take whole blocks"
    scales = vllm_params(grid, dataclasses.replace(m, head_dim=m.head_dim // BLOCK), c, first_rank)
    out = vllm_params(values, m, c, first_rank)
    for rank, named in out.items():
        for name in [n for n, a in named.items() if a.dtype == np.uint8]:  # made of fp8 values
            named[name + "_scale_inv"] = scales[rank][name]
    return out


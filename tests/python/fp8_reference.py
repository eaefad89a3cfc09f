"""vLLM's block-FP8 parameters (``Fp8Config`` with ``weight_block_size=[128, 128]``) of a Hugging
Face checkpoint, in numpy: the reference that test_storage.py holds ``refit run --storage framework
--quantize fp8-block128`` to, byte for byte. Written from vLLM's code, independently of refit's.

* Which weights: ``Fp8Config.get_quant_method`` quantizes every ``LinearBase`` (the decoder
  layers' ``*_proj`` weights) and ``FusedMoE``'s experts; embeddings, ``lm_head``, norms and the
  MoE router (``quant_config=None``) stay bf16.
* The checkpoint: each quantized weight as ``per_block_cast_to_fp8`` (vllm/utils/deep_gemm.py)
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
* FP8 training (``megatron_fp8_params``): Megatron with Transformer Engine's fp8 parameters holds
  the same block-quantized checkpoint in its own layout, scales padded as TE pads them.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from framework_reference import Megatron, Model, Params, Vllm, megatron_params, vllm_params

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quantize"))
from make_vectors import BF16, block128  # noqa: E402

BLOCK = 128


def quantized(name: str) -> bool:
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


def _block_checkpoint(sd: Params) -> tuple[Params, Params]:
    """The block-quantized checkpoint of `sd`: fp8 values (uint8) of the quantized weights and the
    rest as they are, and per tensor its grid of fp32 scales (uint32 bits; zeros for the others,
    laid out and dropped)."""
    values, grid = {}, {}
    for name, a in sd.items():
        if quantized(name):
            q, s = block128(a.view(BF16))
            values[name], grid[name] = q, s.view(np.uint32)
        else:
            values[name] = a
            grid[name] = np.zeros([-(-n // BLOCK) for n in a.shape], dtype=np.uint32)
    return values, grid


def _in_blocks(m: Model) -> Model:
    """The model with sizes counted in blocks: a framework's layout of a weight, applied to its
    grid of scales, gives the layout of the scales when every shard is whole blocks."""
    assert m.head_dim % BLOCK == 0, "kv heads replicated over TP ranks take whole blocks"
    return dataclasses.replace(m, head_dim=m.head_dim // BLOCK, hidden=-(-m.hidden // BLOCK))


def vllm_fp8_params(sd: Params, m: Model, c: Vllm, first_rank: int) -> dict[int, Params]:
    """The parameters of every inference rank of an FP8 vLLM loading the block-quantized `sd`."""
    values, grid = _block_checkpoint(sd)
    scales = vllm_params(grid, _in_blocks(m), c, first_rank)
    out = vllm_params(values, m, c, first_rank)
    for rank, named in out.items():
        for name in [n for n, a in named.items() if a.dtype == np.uint8]:  # made of fp8 values
            named[name + "_scale_inv"] = scales[rank][name]
    return out


TE_PADDING = np.uint32(0x7FC00001)  # a NaN: the padding of a scale row, never read


def megatron_fp8_params(sd: Params, m: Model, c: Megatron) -> dict[int, Params]:
    """The parameters of every training rank of Megatron trained in fp8 with Transformer Engine's
    blockwise recipe (fp8 parameters: ``Float8BlockwiseQTensor``), holding the block-quantized
    `sd`: each fp8 parameter's ``_rowwise_data`` where the bf16 parameter would lie (uint8), and
    its ``_rowwise_scale_inv`` under ``<name>._rowwise_scale_inv``: fp32, one scale per 128x128
    block of the rank's parameter, ``[ceil(M/128), ceil(K/128)]`` padded on the inner dim to a
    multiple of 4 (``Float8BlockQuantizer.get_scale_shape``, transformer_engine/pytorch/tensor/
    float8_blockwise_tensor.py), the padding filled with TE_PADDING. Norms, embeddings, the output
    layer and the router are bf16 (TE modules only)."""
    values, grid = _block_checkpoint(sd)
    scales = megatron_params(grid, _in_blocks(m), c)
    out = megatron_params(values, m, c)
    for rank, named in out.items():
        for name in [n for n, a in named.items() if a.dtype == np.uint8]:
            s = scales[rank][name]
            padded = np.full((s.shape[0], -(-s.shape[1] // 4) * 4), TE_PADDING, dtype=np.uint32)
            padded[:, : s.shape[1]] = s
            named[name + "._rowwise_scale_inv"] = padded
    return out

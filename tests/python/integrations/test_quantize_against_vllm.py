"""refit's FP8 quantization against vLLM's own quantizers, run on torch (CPU) from the installed
vLLM. ctest (tests/quantize) holds refit's quantizer to tests/data/quantize/vectors.json bit for
bit; that file is numpy's rewriting of the framework functions (tests/quantize/make_vectors.py).
Here the same inputs go through the framework functions themselves, so the chain refit -> vectors
-> framework is closed on the framework's code, not on a rewriting of it.

* fp8-block128: vLLM's ``per_block_cast_to_fp8`` (vllm/utils/deep_gemm.py, ``use_ue8m0=False``)
  of each matrix must give the vectors' values and fp32 scales exactly.
* mxfp8: refit follows OCP MX v1.0 as torchao's ``to_mx`` computes it (FLOOR: scale
  2^(floor(log2 amax) - 8), values clamped to +-448; docs/quantization.md). vLLM 0.33.0's torch
  quantizer ``_mxfp8_e4m3_quantize_torch`` (mxfp8_utils.py) rounds the scale up instead,
  2^ceil(log2(amax / 448)), both as a biased byte clamped at 0. For amax = m * 2^(E - 127)
  (1 <= m < 2, E its exponent bits), FLOOR's byte is max(E - 8, 0), and since
  log2 448 = 8 + log2 1.75, vLLM's is max(E - 8 + [m > 1.75], 0). So on every finite block whose
  amax has m <= 1.75, or E < 8 (both bytes 0), the two must agree byte for byte, scale and
  values; on every other finite block vLLM's scale is one binade larger. Blocks with an Inf or
  NaN differ by design (the spec's NaN scale 0xFF; vLLM clamps to 254) and are left out.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")

from vllm.model_executor.layers.quantization.utils.mxfp8_utils import _mxfp8_e4m3_quantize_torch  # noqa: E402
from vllm.utils.deep_gemm import per_block_cast_to_fp8  # noqa: E402

VECTORS = Path(__file__).resolve().parents[2] / "data" / "quantize" / "vectors.json"
CASES: list[dict[str, Any]] = json.loads(VECTORS.read_text())["cases"]
MX_BLOCK = 32


def _decode(text: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=dtype).reshape(shape)


def _input(case: dict[str, Any]) -> torch.Tensor:
    """The case's bf16 weight as a torch tensor (its bits, little-endian)."""
    bits = _decode(case["input"], "<u2", tuple(case["shape"])).astype(np.int16)
    return torch.from_numpy(bits.copy()).view(torch.bfloat16)


def _e4m3_bytes(values: torch.Tensor) -> np.ndarray:
    """e4m3 bytes with every NaN written as 0x7F, as the vectors write them."""
    out = values.view(torch.uint8).numpy().copy()
    out[torch.isnan(values.float()).numpy()] = 0x7F
    return out


def _expected(case: dict[str, Any], scheme: str, scale_dtype: str, scale_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    e = case["expected"][scheme]
    return _decode(e["values"], "u1", tuple(case["shape"])), _decode(e["scales"], scale_dtype, scale_shape)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_block128_is_vllms_per_block_cast_to_fp8(case: dict[str, Any]) -> None:
    x = _input(case)
    matrices = x.reshape(-1, *x.shape[-2:])
    done = [per_block_cast_to_fp8(m, [128, 128], use_ue8m0=False) for m in matrices]
    values = np.stack([_e4m3_bytes(v) for v, _ in done]).reshape(x.shape)
    scales = np.stack([s.numpy().view(np.uint32).copy() for _, s in done])
    scales[np.isnan(np.stack([s.numpy() for _, s in done]))] = 0x7FC00000
    scales = scales.reshape(*x.shape[:-2], *scales.shape[-2:])
    want_values, want_scales = _expected(case, "fp8-block128", "<u4", scales.shape)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(scales, want_scales)


def _vllm_mxfp8(x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """vLLM's torch MXFP8 of x's rows, the last dim zero-padded to whole blocks (zeros change no
    amax): e4m3 bytes [..., n] and scale bytes [..., ceil(n / 32)]."""
    n = x.shape[-1]
    padded = torch.zeros(*x.shape[:-1], -(-n // MX_BLOCK) * MX_BLOCK, dtype=torch.bfloat16)
    padded[..., :n] = x
    rows = padded.reshape(-1, padded.shape[-1])
    values, scales = _mxfp8_e4m3_quantize_torch(rows)
    values = _e4m3_bytes(values).reshape(padded.shape)[..., :n]
    return values, scales.numpy().reshape(*x.shape[:-1], -1)


def _amax_of_blocks(case: dict[str, Any]) -> np.ndarray:
    """The fp32 amax of each 32-element block along the last dim (zero-padded)."""
    x = _input(case).float().numpy()
    n = x.shape[-1]
    blocks = -(-n // MX_BLOCK)
    padded = np.zeros((*x.shape[:-1], blocks * MX_BLOCK), dtype=np.float32)
    padded[..., :n] = x
    return np.abs(padded.reshape(*x.shape[:-1], blocks, MX_BLOCK)).max(axis=-1)


def _exponent_and_mantissa(amax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exponent bits E and the 23 mantissa bits of each fp32 amax."""
    bits = amax.astype(np.float32).view(np.uint32)
    return (bits >> 23) & 0xFF, bits & 0x7FFFFF


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_mxfp8_is_vllms_where_the_scale_rules_agree_and_one_binade_smaller_elsewhere(case: dict[str, Any]) -> None:  # fmt: skip
    x = _input(case)
    n = x.shape[-1]
    vllm_values, vllm_scales = _vllm_mxfp8(x)
    want_values, want_scales = _expected(case, "mxfp8", "u1", vllm_scales.shape)
    amax = _amax_of_blocks(case)
    finite = np.isfinite(amax)
    exponent, mantissa = _exponent_and_mantissa(amax)
    same = finite & ((mantissa <= 0x600000) | (exponent < 8))  # m <= 1.75: 0x600000 / 2^23 = 0.75
    assert same.any(), "no block where the rules agree: the case tests nothing"
    np.testing.assert_array_equal(want_scales[same], vllm_scales[same])
    element_same = np.repeat(same, MX_BLOCK, axis=-1)[..., :n]
    np.testing.assert_array_equal(want_values[element_same], vllm_values[element_same])
    larger = finite & ~same
    np.testing.assert_array_equal(vllm_scales[larger].astype(int), want_scales[larger].astype(int) + 1)


def test_the_vectors_hold_blocks_where_the_mxfp8_rules_differ() -> None:
    """The case above shows how the rules differ only where some block has m > 1.75 and E >= 8
    (make_vectors.py puts such blocks "near the top of each binade")."""
    differ = 0
    for case in CASES:
        amax = _amax_of_blocks(case)
        exponent, mantissa = _exponent_and_mantissa(amax)
        differ += int((np.isfinite(amax) & (mantissa > 0x600000) & (exponent >= 8)).sum())
    assert differ > 0

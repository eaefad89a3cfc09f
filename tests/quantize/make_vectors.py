"""Generates tests/data/quantize/vectors.json: bf16 weights and what the frameworks' quantizers
make of them, the independent reference refit's quantizer (quantize/) must match bit for bit.

Written from the framework functions, with numpy and ml_dtypes (PyPI) for the float8 types:

* fp8-block128 follows vLLM's ``per_block_cast_to_fp8`` (vllm/utils/deep_gemm.py, after DeepGEMM's
  deep_gemm/utils/math.py) with ``use_ue8m0=False``, applied to each matrix of a stacked weight:
  pad to 128x128 blocks with zeros, ``amax = |x|.float().amax(block).clamp(1e-4)``,
  ``sf = amax / 448.0``, values ``(x * (1.0 / sf)).to(float8_e4m3fn)``, scales ``sf`` (fp32).
* mxfp8 follows torchao's ``to_mx`` (torchao/prototype/mx_formats/mx_tensor.py) in its default
  ``ScaleCalculationMode.FLOOR``, the OCP MX v1.0 rule: blocks of 32 along the last dim, the
  biased e8m0 scale ``clamp(exponent_bits(amax) - 127 - 8, -127, 128) + 127``, 0xFF when amax is
  NaN or Inf, values ``clamp(x * 2^(127 - scale), -448, 448).to(float8_e4m3fn)``. A ragged last
  block is padded with zeros, which changes no amax.

torch and numpy disagree on the sign of a NaN made by Inf * 0 (and NaN signs are not portable
between CPUs and GPUs), so the reference writes every NaN value as 0x7F and every NaN fp32 scale
as 0x7FC00000; refit does the same. Every other byte is what the framework function computes.

    python tests/quantize/make_vectors.py tests/data/quantize/vectors.json

(numpy 2.4.6 and ml_dtypes 0.7.0 made the committed file; ctest checks that it reproduces.)

Format: {"format": "refit-quantize-vectors", "version": 1, "cases": [{"name", "shape",
"input" (base64 of the bf16 bits, little-endian uint16, row-major), "expected": {scheme:
{"values" (base64 of the e4m3 bytes, row-major), "scales" (base64 of the scales, row-major
over ceil(shape / block), fp32 little-endian or e8m0 bytes)}}}]}.
"""

from __future__ import annotations

import base64
import json
import sys

import ml_dtypes
import numpy as np

SEED = 20261201
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E8M0 = ml_dtypes.float8_e8m0fnu
F32 = np.float32


def canonical_values(q: np.ndarray) -> np.ndarray:
    """e4m3 bytes with every NaN written as 0x7F."""
    out = q.view(np.uint8).copy()
    out[np.isnan(q.astype(F32))] = 0x7F
    return out


def block128(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """vLLM per_block_cast_to_fp8 on every [M, N] matrix of x (bf16, 2 or more dims)."""
    *lead, m, n = x.shape
    mp, np_ = -(-m // 128) * 128, -(-n // 128) * 128
    padded = np.zeros((*lead, mp, np_), dtype=BF16)
    padded[..., :m, :n] = x
    view = padded.reshape(*lead, mp // 128, 128, np_ // 128, 128).astype(F32)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        amax = np.abs(view).max(axis=(-3, -1), keepdims=True)  # NaN wins, as torch.amax
        amax = np.maximum(amax, F32(1e-4))  # keeps NaN, as torch.clamp
        sf = amax / F32(448.0)
        scaled = view * (F32(1.0) / sf)
    values = canonical_values(scaled.astype(E4M3)).reshape(*lead, mp, np_)[..., :m, :n]
    scales = sf.reshape(*lead, mp // 128, np_ // 128).astype(F32).view(np.uint32).copy()
    scales[np.isnan(sf.reshape(scales.shape))] = 0x7FC00000
    return np.ascontiguousarray(values), scales.astype("<u4")


def mxfp8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torchao to_mx(x, float8_e4m3fn, 32, FLOOR), the last dim zero-padded to whole blocks."""
    *lead, n = x.shape
    np_ = -(-n // 32) * 32
    padded = np.zeros((*lead, np_), dtype=BF16)
    padded[..., :n] = x
    blocks = padded.reshape(*lead, np_ // 32, 32).astype(F32)
    with np.errstate(invalid="ignore", over="ignore"):
        amax = np.abs(blocks).max(axis=-1, keepdims=True)
    exponent = (amax.view(np.int32) >> 23) & 0xFF
    biased = np.clip(exponent - 127 - 8, -127, 128) + 127
    biased = np.where(np.isfinite(amax), biased, 255)
    finite = biased != 255
    # 2^(127 - biased) as fp32 (torchao's _e8m0_scale_to_reciprocal_fp32); NaN for a NaN scale.
    inverse = np.where(finite, np.ldexp(F32(1.0), (127 - np.where(finite, biased, 127)).astype(np.int32)), F32(np.nan))
    with np.errstate(invalid="ignore"):
        data = np.clip(blocks * inverse.astype(F32), F32(-448.0), F32(448.0))
    values = canonical_values(data.astype(E4M3)).reshape(*lead, np_)[..., :n]
    scales = biased.reshape(*lead, np_ // 32).astype(np.uint8)
    # The byte is e8m0's encoding of 2^(biased - 127): ml_dtypes' float8_e8m0fnu agrees.
    as_e8m0 = np.ldexp(np.float64(1.0), scales[finite.reshape(scales.shape)].astype(np.int32) - 127).astype(E8M0)
    assert np.array_equal(as_e8m0.view(np.uint8), scales[finite.reshape(scales.shape)])
    return np.ascontiguousarray(values), scales


def bf16(values) -> np.ndarray:
    return np.asarray(values, dtype=F32).astype(BF16)


def random_weight(rng: np.random.Generator, shape: tuple[int, ...], spread: int) -> np.ndarray:
    """Normal values, each row scaled by its own power of two in [-spread, spread]."""
    rows = rng.integers(-spread, spread + 1, size=shape[:-1] + (1,))
    return (rng.standard_normal(shape) * np.ldexp(1.0, rows)).astype(F32)


def special_weight(rng: np.random.Generator) -> np.ndarray:
    """200x300 (ragged 128x128 blocks on both dims, a ragged 32-block per row), one scenario per
    128x128 block (rows 0:128, 128:200; columns 0:128, 128:256, 256:300)."""
    w = random_weight(rng, (200, 300), 20)
    # Inf in a block: block128 makes the infinities NaN and the rest +-0; mxfp8 NaNs its 32-blocks.
    w[3, 7], w[100, 40] = np.inf, -np.inf
    w[0:128, 128:256] = 0.0  # an all-zero block: amax clamped to 1e-4 (block128), scale 2^-127 (mxfp8)
    # Round-to-nearest-even ties: 448 anchors give block128 scale 1 (multiplier 1) and mxfp8 scale
    # 2^0, so these land exactly half-way between two e4m3 values (subnormal ties included).
    ties = [1.0625, 1.1875, 17.0, 19.0, 0.0009765625, 0.0029296875, 0.005859375, 104.0, 120.0, 232.0]
    w[0:128, 256:300] = rng.choice(ties, size=(128, 44)) * rng.choice([-1.0, 1.0], size=(128, 44))
    w[0:128, 256] = 448.0
    w[0:128, 288] = 448.0
    # Denormal range: bf16 subnormals, tiny normals and values below block128's 1e-4 clamp.
    tiny = np.ldexp(1.0, rng.integers(-133, -100, size=(72, 128))) * rng.choice([-1.5, -1.0, 1.0, 1.25], size=(72, 128))
    tiny[:, 64:] = rng.standard_normal((72, 64)) * 2e-5
    w[128:200, 0:128] = tiny
    w[150, 200], w[190, 130] = np.nan, -np.nan  # NaN: a NaN block128 block, NaN mxfp8 blocks
    # Near the top of each binade: mxfp8's power-of-two scale leaves values up to 2^9 to saturate.
    top = rng.uniform(1.75, 2.0, size=(72, 44)) * np.ldexp(1.0, rng.integers(-10, 10, size=(72, 1)))
    w[128:200, 256:300] = top * rng.choice([-1.0, 1.0], size=(72, 44))
    return w


def encode(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()).decode()


def case(name: str, weight: np.ndarray) -> dict:
    x = bf16(weight)
    expected = {}
    for scheme, fn in (("fp8-block128", block128), ("mxfp8", mxfp8)):
        values, scales = fn(x)
        expected[scheme] = {"values": encode(values), "scales": encode(scales)}
    return {"name": name, "shape": list(x.shape), "input": encode(x.view(np.uint16)), "expected": expected}


def main(path: str) -> None:
    rng = np.random.default_rng(SEED)
    experts = random_weight(rng, (3, 130, 70), 4) * np.array([1e-3, 1.0, 1e3]).reshape(3, 1, 1)
    extremes = random_weight(rng, (257, 33), 60)
    extremes[5, 5], extremes[200, 32] = 3.38e38, -3.0e38  # near bf16's largest finite
    cases = [
        case("specials_200x300", special_weight(rng)),
        case("experts_3x130x70", experts),
        case("extremes_257x33", extremes),
        case("normal_128x256", rng.standard_normal((128, 256))),
        case("row_1x5", rng.standard_normal((1, 5))),
    ]
    with open(path, "w") as f:
        json.dump({"format": "refit-quantize-vectors", "version": 1, "seed": SEED, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])

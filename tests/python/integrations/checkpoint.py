"""A random Hugging Face checkpoint of a tiny model (config.json + model.safetensors), the one
input both frameworks load in the integration tests: Megatron-Core's training side and vLLM's own
loader. Weights are finite bf16 (framework_reference.hf_state_dict's names, experts apart), the
DeepSeek router bias fp32; an MTP layer is written after the decoder layers when the config has
one (num_nextn_predict_layers)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from framework_reference import Model, Params, hf_state_dict


def model_of(config: dict) -> Model:
    """The reference's model for a config.json, with its MTP layers."""
    return dataclasses.replace(Model.from_config(config), mtp=config.get("num_nextn_predict_layers", 0))


def finite(state: Params, rng: np.random.Generator) -> Params:
    """bf16 bit patterns made finite and fp32 ones small normal numbers, so that no loader's
    dtype handling can change a NaN's payload."""
    out: Params = {}
    for name, a in state.items():
        if a.dtype == np.uint16:
            out[name] = (a & 0x83FF) | 0x3C00  # exponents 2^-7 .. 2^0, any sign and mantissa
        else:
            out[name] = rng.standard_normal(a.shape).astype(np.float32).view(np.uint32)
    return out


def checkpoint_state(config: dict, seed: int) -> Params:
    """The checkpoint's tensors as bit patterns (uint16 for bf16, uint32 for fp32)."""
    rng = np.random.default_rng(seed)
    return finite(hf_state_dict(model_of(config), rng), rng)


def as_torch(a: np.ndarray) -> torch.Tensor:
    """A bit pattern array as the torch tensor it encodes (bf16 or fp32)."""
    if a.dtype == np.uint16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a).view(np.float32))


def write(config_path: Path, out: Path, seed: int) -> Path:
    """Writes the checkpoint of seed `seed` for the config at `config_path` into `out`."""
    config = json.loads(config_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    save_file({n: as_torch(a) for n, a in checkpoint_state(config, seed).items()}, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(config))
    return out

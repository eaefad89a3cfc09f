"""refit driven by live framework models: the source side from a Megatron-Core model
(:mod:`refit.integrations.megatron`), the destination side inside vLLM's workers
(:mod:`refit.integrations.vllm`, a ``worker_extension_cls``). Each module imports its framework
only when called, so ``import refit`` needs neither.

Both hand refit the frameworks' own parameter tensors, no copies, keyed by the names refit's
storage maps give them (``Problem.parameters(rank)``), and build the problem from the frameworks'
configs and parallel state: the logical tensors are the Hugging Face checkpoint's, so both take
the checkpoint's ``config.json``. What is supported, and what a refit replaces in NeMo RL, verl,
slime/Miles and OpenRLHF: docs/guide/integrations.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["megatron", "vllm"]


def problem_options(infer: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for :meth:`refit.Problem.from_model`, which both sides must build alike: with a
    ``placement=round_robin`` inference layout, one tensor per routed expert (a round-robin
    placement is no layout of a stacked ``[E, ...]`` tensor), unless the caller said otherwise."""
    if "placement=round_robin" in infer.split(","):
        options.setdefault("per_expert", True)
    return options


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        return importlib.import_module(f"refit.integrations.{name}")
    raise AttributeError(f"module 'refit.integrations' has no attribute {name!r}")

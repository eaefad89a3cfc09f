"""refit: plan, predict and perform the transfer of sharded model weights from training GPUs
(Megatron layouts) to inference GPUs (vLLM layouts).

Plan and predict, no GPU needed::

    import refit
    problem = refit.Problem.from_model("deepseek-v3", train="pp=16,ep=16", infer="tp=32,engines=8")
    cluster = refit.Cluster.preset("dgx-h100")
    plan = refit.plan(problem, cluster, strategy="refit")
    refit.simulate(problem, cluster, strategy="refit").predicted_s
    refit.compare(problem, cluster)                       # one row per strategy
    refit.sweep(problem, cluster, vary={"nic_gbps": [200, 400, 800]})

Any model laid out as PyTorch's DTensor lays it (``refit.Layout.of(device_mesh, placements)``)::

    problem = refit.Problem.from_layouts(
        [refit.TensorLayout("w", (64, 128), "bf16", source=refit.Layout((2, 2), ("R", "S1")),
                            destination=refit.Layout((2,), ("S0",)))],
        source_ranks=4, destination_ranks=2)

Perform a refit between the processes of a job (torchrun, Ray, mpi4py)::

    executor = refit.Executor("ucx", refit.exchange.torch_distributed())
    prepared = executor.prepare(plan, {shard.tensor: tensor for ...})
    prepared.execute()                                    # every training step

or with the frameworks' own parameters (Megatron's on training ranks, vLLM's on inference
ranks, as ``problem.parameters(rank)`` lists them)::

    prepared = executor.prepare(plan, dict(model.named_parameters()), storage="framework")

Errors are :class:`refit.Error` subclasses: bad input a :class:`refit.BadInput` (ValueError),
failures a :class:`refit.Failure` (RuntimeError), timeouts a :class:`refit.Timeout`
(TimeoutError), with the message the ``refit`` command prints.
"""

from __future__ import annotations

from typing import Any

from refit import _refit, exchange
from refit._cluster import Cluster, preset_keys, presets
from refit._errors import BadInput, Error, Failure, PeerFailed, Timeout
from refit._executor import (
    DELTA_REBALANCE,
    DeltaStep,
    ExecutionReport,
    Executor,
    Prepared,
    executors,
    fp8_parameter_buffers,
    numpy_dtype,
    run,
    torch_dtype,
)
from refit._plan import (
    Explain,
    LowerBound,
    Plan,
    PlanStats,
    SideSummary,
    Staging,
    Strategy,
    lower_bound,
    plan,
    strategies,
)
from refit._join import Join, JoinPart, plan_join
from refit._layouts import Layout, TensorLayout
from refit._problem import Box, Parameter, Problem, Region, Shard, Tensor
from refit._simulate import (
    Breakdown,
    Contributor,
    CriticalStep,
    ElasticSimulation,
    Resource,
    Simulation,
    compare,
    deployments,
    simulate,
    simulate_elastic,
)
from refit.sweep import sweep, to_frame

__version__ = "0.1.0"

__all__ = [
    "BadInput",
    "Box",
    "Breakdown",
    "Cluster",
    "Contributor",
    "CriticalStep",
    "DELTA_REBALANCE",
    "DeltaStep",
    "ElasticSimulation",
    "Error",
    "ExecutionReport",
    "Executor",
    "Explain",
    "Failure",
    "Layout",
    "Join",
    "JoinPart",
    "LowerBound",
    "Parameter",
    "PeerFailed",
    "Plan",
    "PlanStats",
    "Prepared",
    "Problem",
    "Region",
    "Resource",
    "Shard",
    "SideSummary",
    "Simulation",
    "Staging",
    "Strategy",
    "Tensor",
    "TensorLayout",
    "Timeout",
    "compare",
    "deployments",
    "exchange",
    "executors",
    "figures",
    "fp8_parameter_buffers",
    "lower_bound",
    "models",
    "numpy_dtype",
    "plan",
    "plan_join",
    "preset_keys",
    "presets",
    "run",
    "simulate",
    "simulate_elastic",
    "strategies",
    "sweep",
    "to_frame",
    "torch_dtype",
]


def models() -> list[str]:
    """The models compiled into refit (``refit models``): ``deepseek-v3``, ``qwen3-235b-a22b``, ..."""
    return list(_refit.builtin_models())


def __getattr__(name: str) -> Any:
    # refit.figures imports matplotlib, which an RL job that only refits does not need.
    if name == "figures":
        import importlib

        return importlib.import_module("refit.figures")
    raise AttributeError(f"module 'refit' has no attribute {name!r}")

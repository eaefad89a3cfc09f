"""A what-if sweep whose points run as Ray tasks: here in a local Ray instance, on a cluster
after ``ray.init(address="auto")``. Ray is not a dependency of refit: ``pip install ray``.

    python examples/python/sweep_on_ray.py

refit.sweep takes any concurrent.futures executor and hands each point (plain data: its problem's
and cluster's sources) to refit.sweep.predict_point wherever the executor runs it, so every Ray
worker needs refit installed. Ray has no concurrent.futures executor of its own; the one below
is four lines, since an ObjectRef's .future() is a concurrent.futures.Future.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Callable

import ray

import refit


class RayExecutor(concurrent.futures.Executor):
    """Runs each submitted call as a Ray task."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        return ray.remote(fn).remote(*args, **kwargs).future()


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False)
    problem = refit.Problem.from_model("qwen3-30b-a3b", train="ep=8,pp=2", infer="tp=8,engines=2")
    rows = refit.sweep(problem, refit.Cluster.preset("dgx-h100"), vary={"nic_gbps": [200, 400, 800]},
                       strategies=["refit"], executor=RayExecutor(), as_frame=False)  # fmt: skip
    for r in rows:
        print(f"nic_gbps={r['nic_gbps']}: {r['strategy']} {r['predicted_s'] * 1e3:.1f} ms")
    ray.shutdown()


if __name__ == "__main__":
    main()

"""A restarted engine refilled from Python (refit.plan_join, docs/elastic.md "Joins"), between real
processes over torch.distributed (gloo), tiny-qwen3-moe into three engines of TP2
(join_worker.py says what each process does). Expected:

- after the full refit every inference rank holds the current weights; after the join the
  restarted engine's fresh (zeroed) arrays hold them byte for byte;
- from peers only, the training ranks are free: not in the join's world, sending nothing; with
  both, each side sends some tensors;
- what the restarted engine's ranks receive is what the senders send plus what they forward to
  each other over NVLink: sum(received by joining) = sum(sent by peers and training) + sum(sent
  by joining)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import refit
from conftest import TINY_MOE, free_port, mpirun_env, run_workers

SIZE = 8


def run_join_workers(join: int, source: str) -> list[dict[str, Any]]:
    """Starts the eight processes, waits for them; each one's JSON line."""
    env = mpirun_env()
    env.update(WORLD_SIZE=str(SIZE), JOIN=str(join), SOURCE=source, INIT_METHOD=f"tcp://127.0.0.1:{free_port()}")
    workers, outputs = run_workers(Path(__file__).with_name("join_worker.py"), SIZE, env)
    results = []
    for w, (out, err) in zip(workers, outputs):
        assert w.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def roles(results: list[dict[str, Any]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in results:
        out.setdefault(r["role"], []).append(r["rank"])
    return out


def sent(results: list[dict[str, Any]], *roles_: str) -> int:
    return sum(r["sent"] for r in results if r["role"] in roles_)


def check_every_byte_lands(results: list[dict[str, Any]]) -> None:
    for r in results:
        assert r["full_right"] is not False, r  # every engine had the weights after the full refit
        assert (r["join_right"] is True) == (r["role"] == "joining"), r
    received = sum(r["received"] for r in results if r["role"] == "joining")
    assert received == sent(results, "peer", "training", "joining") > 0


@pytest.mark.processes
def test_a_restarted_engine_is_refilled_from_peers_while_the_training_ranks_are_free() -> None:
    results = run_join_workers(1, "peers")
    # Engine 1 (ranks 4, 5) from engines 0 and 2; join ranks: peers 2, 3, 6, 7 then 4, 5.
    assert roles(results) == {"free": [0, 1], "peer": [2, 3, 6, 7], "joining": [4, 5]}
    assert results[0]["world"] == [2, 3, 6, 7, 4, 5]
    assert [r["join_rank"] for r in results] == [None, None, 0, 1, 4, 5, 2, 3]
    assert sent(results, "free") == 0 and all(r["received"] == 0 for r in results if r["role"] == "free")
    check_every_byte_lands(results)


@pytest.mark.processes
def test_a_join_from_both_takes_some_tensors_from_each_side() -> None:
    results = run_join_workers(0, "both")
    assert roles(results) == {"training": [0, 1], "joining": [2, 3], "peer": [4, 5, 6, 7]}
    assert sent(results, "training") > 0 and sent(results, "peer") > 0
    check_every_byte_lands(results)


def test_plan_join_names_what_does_not_fit() -> None:
    problem = refit.Problem.from_model(str(TINY_MOE), train="tp=2,ep=2,etp=1", infer="tp=2,engines=3")
    cluster = refit.Cluster.preset("cpu-host:gpus_per_domain=2")
    with pytest.raises(refit.BadInput, match=r"--join: engine 3 is not in \[0, 3\)"):
        refit.plan_join(problem, cluster, 3)
    with pytest.raises(refit.BadInput, match="--peers: engine 1 is the one that joins"):
        refit.plan_join(problem, cluster, 1, peers=[1])
    with pytest.raises(refit.BadInput, match="source: 'nobody'"):
        refit.plan_join(problem, cluster, 1, source="nobody")
    join = refit.plan_join(problem, cluster, 1, source="peers")
    with pytest.raises(ValueError, match="rank 0 is free"):
        join.exchange(0)
    # A free process's join buffers are none; a peer's are its own arrays, not copies.
    assert join.buffers(0, {}) == {}
    mine = {s.tensor: object() for s in problem.shards(2)}
    picked = join.buffers(2, mine)
    assert picked and all(picked[name] is mine[name] for name in picked)
    with pytest.raises(refit.BadInput, match="rank 2: the join needs its buffer of tensor"):
        join.buffers(2, {})

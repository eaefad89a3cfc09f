"""refit.simulate_elastic gives what ``refit simulate --members/--join/--fail --json`` gives (timings
aside), and bad engine indices are bad input naming the option."""

from __future__ import annotations

import re
from typing import Any

import pytest

import refit
from conftest import TINY_MOE

TIMINGS = {"full_plan_s", "delta_plan_s"}
INFER = "tp=2,engines=3"
CLUSTER = "dgx-h100:gpus_per_node=2"


def _problem() -> refit.Problem:
    return refit.Problem.from_model(str(TINY_MOE), train="tp=2,ep=2,etp=1", infer=INFER)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (["--members", "0,2"], {"members": [0, 2]}),
        (["--join", "1", "--from", "peers"], {"join": 1, "source": "peers"}),
        (["--fail", "1", "--timeout", "5"], {"fail": 1, "timeout_s": 5.0}),
    ],
)
def test_the_elastic_fields_match_the_command(cli_json: Any, args: list[str], kwargs: dict[str, Any]) -> None:
    expected = cli_json("simulate", "--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", INFER,
                        "--cluster", CLUSTER, *args)  # fmt: skip
    got = refit.simulate_elastic(_problem(), refit.Cluster.preset(CLUSTER), **kwargs)
    untimed = {k: v for k, v in expected["elastic"].items() if k not in TIMINGS}
    assert {k: got.elastic[k] for k in untimed} == untimed
    assert got.simulation.predicted_s == pytest.approx(expected["strategies"][0]["predicted_s"])


def test_peers_only_leaves_the_training_ranks_idle() -> None:
    got = refit.simulate_elastic(_problem(), refit.Cluster.preset(CLUSTER), join=0, source="peers")
    assert got.elastic["training_bytes"] == 0 and got.elastic["peer_bytes"] > 0


def test_an_engine_out_of_range_is_bad_input_naming_the_option() -> None:
    with pytest.raises(refit.BadInput, match="--members: member engine 3 is not in"):
        refit.simulate_elastic(_problem(), refit.Cluster.preset(CLUSTER), members=[0, 3])
    with pytest.raises(refit.BadInput, match="--from: 'nobody'"):
        refit.simulate_elastic(_problem(), refit.Cluster.preset(CLUSTER), join=0, source="nobody")


def test_an_empty_list_of_peers_or_members_is_refused_as_the_command_refuses_it() -> None:
    # peers=[] was read as "every other engine", the default, where refit simulate refuses
    # --peers '' ("--peers: is empty"); None is the default.
    problem, cluster = _problem(), refit.Cluster.preset(CLUSTER)
    for call in (lambda: refit.simulate_elastic(problem, cluster, join=0, peers=[], source="peers"),
                 lambda: refit.plan_join(problem, cluster, 0, peers=[], source="peers")):  # fmt: skip
        with pytest.raises(refit.BadInput, match=re.escape("peers: is empty (None for the default)")):
            call()
    with pytest.raises(refit.BadInput, match=re.escape("members: is empty (None for the default)")):
        refit.simulate_elastic(problem, cluster, members=[], join=0)
    assert refit.plan_join(problem, cluster, 0, peers=None, source="peers").peers == [1, 2]

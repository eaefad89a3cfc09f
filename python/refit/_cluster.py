"""Clusters: the hardware a refit runs on, sized to a problem's job when it is used."""

from __future__ import annotations

import json
from typing import Any, Union

from refit import _refit
from refit._checks import checked_text
from refit._errors import BadInput
from refit._paths import FilePath, path_text
from refit._problem import Problem

__all__ = ["Cluster", "preset_keys", "presets"]


def presets() -> list[str]:
    """The cluster presets: ``dgx-h100``, ``dgx-h200``, ``dgx-b200``, ``gb200-nvl72``, ..."""
    return list(_refit.preset_names())


def preset_keys() -> dict[str, str]:
    """Every preset override key with its meaning (``nic_gbps``, ``gpus_per_domain``, ...)."""
    return dict(_refit.preset_keys())


def _format_value(key: str, value: object) -> str:
    """A keyword override's value as the spec spells it: a number. A string is refused, as
    ``Cluster.preset``'s typing says: ``"400,nodes=1"`` would add overrides of its own, and
    ``"400"`` is a spec's spelling, not a number's."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{key}: a preset override takes a number, got {value!r}", "invalid argument")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _split_spec(spec: str) -> tuple[str, list[str]]:
    """A spec's preset name and its ``key=value`` items as given, in order: nothing stripped and
    no item dropped, so that the compiled part refuses what ``refit --cluster SPEC`` refuses (a
    space after the name, ``"dgx-h100:"``, a trailing comma, a key given twice)."""
    name, colon, rest = spec.partition(":")
    return name, rest.split(",") if colon else []


def _override_key(key: str) -> str:
    """A keyword override's key, refused when it holds what separates a spec's parts (``,``,
    ``=``, ``:``) or a control character: ``**{"copy_gbps=1,nodes": 3}`` would add overrides of
    its own to the spec."""
    if not key or any(c in ",=:" or not c.isprintable() for c in key):
        raise BadInput(
            f"Cluster.preset: {key!r} is not an override key (keys: {', '.join(preset_keys())})", "invalid argument"
        )
    return key


def _with_overrides(given: list[str], overrides: dict[str, str]) -> list[str]:
    """The spec's items with the keyword overrides set: an item of a key the keywords set takes
    the keyword's value in its place, the other keywords follow; every other item stays as it
    was given (the compiled part judges it)."""
    rest = dict(overrides)
    out = []
    for item in given:
        key, equals, _ = item.partition("=")
        out.append(f"{key}={rest.pop(key)}" if equals and key in rest else item)
    return out + [f"{key}={value}" for key, value in rest.items()]


def _join_spec(name: str, items: list[str]) -> str:
    """The spec of a preset name and its ``key=value`` items."""
    return name + ":" + ",".join(items) if items else name


class Cluster:
    """Where a cluster comes from: a preset (with overrides), a cluster file, an NCCL topology dump,
    or this machine's discovery.

    A cluster is sized to a problem's job when it is used: ``Cluster.preset("dgx-h100")`` means
    "as many DGX H100 nodes as the job needs, training ranks on the first GPUs, inference ranks
    right after them", as ``--cluster dgx-h100`` does on the command line::

        cluster = refit.Cluster.preset("gb200-nvl72:gpus_per_domain=64")
        cluster = refit.Cluster.preset("dgx-h100", nic_gbps=800, oversubscription=2)
    """

    def __init__(self, **source: Any) -> None:
        """Use :meth:`preset`, :meth:`from_file`, :meth:`from_nccl_xml` or :meth:`discover`."""
        self._source = source
        self._placed: dict[tuple[int, int], _refit.PlacedCluster] = {}
        self._load(0, 0)  # refuses an unknown preset, key or file now rather than at first use

    @classmethod
    def preset(cls, spec: str = "dgx-h100", **overrides: Union[int, float]) -> Cluster:
        """A preset, ``NAME`` or ``NAME:key=value,...``, with more overrides as keywords.

        Keys (:func:`refit.preset_keys`): nodes, gpus_per_node, gpus_per_domain, nics_per_node,
        nic_gbps (NIC line rate in Gb/s), nvlink_gbps, copy_gbps, latency_us, chunk_overhead_us,
        transfer_overhead_us, nvlink_latency_us, oversubscription, and infer_offset (the first GPU of
        the inference ranks).

        Raises:
            refit.BadInput: an unknown preset or key, a key the spec gives twice, an item that is
                not ``key=value`` (a trailing comma), or a bad value (the message names it): the
                spec is read as ``refit --cluster SPEC`` reads it, spaces included.
        """
        if not isinstance(spec, str):
            raise TypeError(f"Cluster.preset: a preset name (e.g. 'dgx-h100'), got {type(spec).__name__}")
        name, given = _split_spec(spec)
        keyword = {_override_key(k): _format_value(k, v) for k, v in overrides.items()}
        return cls(preset=_join_spec(name, _with_overrides(given, keyword)))

    @classmethod
    def from_file(cls, path: FilePath) -> Cluster:
        """A cluster file (JSON, the format of ``refit topo --json`` and :meth:`describe`)."""
        return cls(file=path_text(path, "cluster file"))

    @classmethod
    def from_nccl_xml(cls, path: FilePath) -> Cluster:
        """What ``NCCL_TOPO_DUMP_FILE`` wrote on one node, repeated for as many nodes as needed."""
        return cls(nccl_xml=path_text(path, "NCCL topology dump"))

    @classmethod
    def discover(
        cls,
        *,
        sysfs_root: str = "/sys",
        nvml_library: str = "libnvidia-ml.so.1",
        measure: bool = False,
    ) -> Cluster:
        """This machine, through NVML and sysfs (a host without NVIDIA GPUs is modelled as the
        cpu-host preset, with the RDMA NICs found); :attr:`notes` says what was not found.

        With ``measure``, refit's copy and quantize kernels are timed on each GPU found (a few
        seconds and up to 2.4 GB of device memory per GPU, each time the cluster is sized to a
        job) and their rates replace figures scaled from another GPU, as ``--measure`` does."""
        return cls(discover=True, sysfs_root=checked_text(sysfs_root, "sysfs_root"),
                   nvml_library=checked_text(nvml_library, "nvml_library"), measure=measure)

    @property
    def spec(self) -> str:
        """The preset spec (``NAME:key=value,...``), the file, or ``"discover"``."""
        for key in ("preset", "file", "nccl_xml"):
            if key in self._source:
                return str(self._source[key])
        return "discover"

    @property
    def is_preset(self) -> bool:
        """Whether the cluster is a preset, whose keys :meth:`with_overrides` and sweeps change."""
        return "preset" in self._source

    @property
    def overrides(self) -> dict[str, str]:
        """The preset's overrides, as given."""
        items = _split_spec(self.spec)[1] if self.is_preset else []
        return {key: value for key, _, value in (item.partition("=") for item in items)}

    @property
    def notes(self) -> list[str]:
        """What discovery did not find or did not use, and why (empty for other sources)."""
        return list(self._load(0, 0).notes)

    @property
    def assumptions(self) -> list[str]:
        """What the cluster's figures assume where nothing was measured, a sentence each: e.g. the
        copy rate of a GPU refit's kernels have not run on (every prediction on it says them too)."""
        return list(self._load(0, 0).assumptions)

    def with_overrides(self, **overrides: Union[int, float]) -> Cluster:
        """The same preset with these keys set (others kept)."""
        if not self.is_preset:
            raise ValueError(f"with_overrides: {self.spec} is not a preset: only presets take overrides")
        return Cluster.preset(self.spec, **overrides)

    def placed(self, problem: Problem) -> _refit.PlacedCluster:
        """The cluster sized to the problem's job, its ranks placed (cached per job size)."""
        if not isinstance(problem, Problem):
            raise TypeError(f"problem: expected a refit.Problem, got {problem!r}")
        return self._load(problem.source_ranks, problem.destination_ranks)

    def describe(self, problem: Union[Problem, None] = None) -> dict[str, Any]:
        """The cluster in the cluster file format (``refit topo --json``), placed for the
        problem's job when one is given."""
        placed = self.placed(problem) if problem is not None else self._load(0, 0)
        return json.loads(placed.to_json())

    def _load(self, source_ranks: int, destination_ranks: int) -> _refit.PlacedCluster:
        key = (source_ranks, destination_ranks)
        if key not in self._placed:
            self._placed[key] = _refit.PlacedCluster.load(
                **self._source, source_ranks=source_ranks, destination_ranks=destination_ranks
            )
        return self._placed[key]

    def __repr__(self) -> str:
        return f"<refit.Cluster {self.spec}>"

"""Scorers as specs, the registry's data, and building scorers from specs.

A scorer is always a kind plus arguments (``ScorerSpec``); that spec is what YAML holds and what SQLite
stores beside every score. Built-in checks, the judges and custom Python scorers go through this one
path. Parsing references and reading ``scorers.yaml`` is the dataset's job (``evalcli.dataset``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import EvalcliError, Problem, describe
from ..records import record
from ..results import Outcome, Threshold
from ..secret_references import References, digestible, references
from .base import ScorerRun, finite_score, own_copy
from .kinds import BuildContext, Scorer, origin
from .kinds import find as find_kind

if TYPE_CHECKING:
    from ..llm import LLMClient


Made = TypeVar("Made")


class BySpecs(Generic[Made]):
    """What is made from a sequence of specs, made once per distinct sequence: keyed by the specs' identities
    (identical references share one spec, ``parse_list``, so every turn's own list of the same gates finds what the
    first made), the specs kept beside it so their ids are never another spec's. At most ``bound`` sequences are
    kept, all let go when one more comes: the dataset's come back at once, a turn's own (a python scorer keeps its own
    spec) come once, and memory stays flat however many conversations a run has (docs/performance.md)."""

    def __init__(self, bound: int = 256) -> None:
        self.bound = bound
        self._made: dict[tuple[int, ...], tuple[tuple[ScorerSpec, ...], Made]] = {}

    def __len__(self) -> int:
        return len(self._made)

    def get(self, specs: Sequence[ScorerSpec], make: Callable[[Sequence[ScorerSpec]], Made]) -> Made:
        """What ``make(specs)`` made for these specs, made now the first time."""
        key = tuple(map(id, specs))
        known = self._made.get(key)
        if known is None:
            if len(self._made) >= self.bound:
                self._made.clear()
            known = self._made[key] = (tuple(specs), make(specs))
        return known[1]


@record(frozen=True)
class CalibrationBar:
    """``calibrated: {min_kappa, min_labels, min_accuracy}`` on a judge used as a gate: what the latest stored
    calibration of its exact configuration must show before a run may gate on it (docs/judges.md#calibrated-gates)."""

    min_kappa: float | None = None
    """Cohen's kappa against pass/fail labels, at least."""
    min_labels: int | None = None
    """Labelled conversations compared, at least."""
    min_accuracy: float | None = None
    """Accuracy against the labels (pass/fail or scale), at least."""

    def raw(self) -> dict[str, Any]:
        """As written (the keys given)."""
        return {k: v for k, v in (("min_kappa", self.min_kappa), ("min_labels", self.min_labels),
                                  ("min_accuracy", self.min_accuracy)) if v is not None}


@record(frozen=True)
class ScorerSpec:
    """One scorer as configured: kind + arguments, its id, optional threshold, and where it was written."""

    id: str
    kind: str
    args: dict[str, Any]
    threshold: Threshold | None = None
    registered: bool = False
    where: str = ""
    """FILE:LINE:COL of the reference, for error messages. Identical references share one spec (see
    ``parse_list``), which keeps the first one's; only python scorers, whose import errors name it,
    always keep their own."""
    calibrated: CalibrationBar | None = None
    """A gate's calibration bar (docs/judges.md#calibrated-gates); ``None``: it may gate unmeasured."""

    def spec(self) -> dict[str, Any]:
        """What is stored beside every score: enough to rebuild this exact scorer."""
        return {"kind": self.kind, "args": self.args}

    def fingerprint(self, refs: References | None = None) -> str:
        """A digest of everything that decides this scorer's scores and how they count: kind, arguments, id,
        threshold and whether its scores are stored (a run keeps it, so a resume can tell a changed scorer).

        Made once per spec while the secrets known stay the same (``references()`` is the same object): a dataset's
        conversations share their turns' specs, and each conversation's content names every one of them
        (docs/performance.md). ``refs``: ``references()``, looked up once by a caller asking for many specs."""
        refs = refs or references()
        made: tuple[References, str] | None = self.__dict__.get("_fingerprinted")
        if made is not None and made[0] is refs:
            return made[1]
        digest = self._fingerprint()
        object.__setattr__(self, "_fingerprinted", (refs, digest))
        return digest

    def __getstate__(self) -> dict[str, Any]:
        """What pickling keeps (a worker's copy): the fields, not the digest made in this process."""
        return {key: value for key, value in self.__dict__.items() if key != "_fingerprinted"}

    def _fingerprint(self) -> str:
        threshold = None if self.threshold is None else self.threshold.raw
        # a secret in the arguments is a reference to its variable here: the digest confirms no guess of it
        canonical = json.dumps(digestible({"id": self.id, "kind": self.kind, "args": self.args, "threshold": threshold,
                                           "registered": self.registered}), sort_keys=True, default=repr,
                               ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def inline_yaml(spec: ScorerSpec) -> str:
    """The spec as one line of YAML, defaults left out, that parses back to it when pasted: ``{includes: '54'}``,
    ``{called_tool: {name: x, times: 2}}``, ``used_no_tools``."""
    kind = find_kind(spec.kind)
    args = dict(spec.args)
    if kind is not None:
        defaults = {kind.key(k): f.get_default(call_default_factory=True) for k, f in kind.args.model_fields.items()
                    if not f.is_required()}
        args = {k: v for k, v in args.items() if k not in defaults or defaults[k] != v}
        if kind.main is None and not args:
            return spec.kind
        if kind.main is not None and list(args) == [kind.key(kind.main)]:
            return flow_yaml({spec.kind: args[kind.key(kind.main)]})
    return flow_yaml({spec.kind: args or None})


def registration_line(spec: ScorerSpec) -> str:
    """The line of ``scorers.yaml`` (under ``scorers:``) that registers this configuration under its own id, so the
    dataset's reference becomes registered as it stands: ``includes(54): {includes: '54'}``."""
    return flow_yaml({spec.id: _flow_value(spec)})[1:-1]


def _flow_value(spec: ScorerSpec) -> Any:
    import yaml

    return yaml.safe_load(inline_yaml(spec))


def flow_yaml(value: Any) -> str:
    """``value`` as one line of YAML flow style (``{includes: costs}``, ``[a, b]``), as it parses back."""
    import yaml

    try:
        text = yaml.safe_dump(_dumpable(value), default_flow_style=True, allow_unicode=True, width=10_000,
                              sort_keys=False)
    except yaml.YAMLError:  # a value YAML cannot write (an object a plugin made): its JSON text, one line
        return json.dumps(value, ensure_ascii=False, default=str)
    text = text.removesuffix("\n").removesuffix("\n...").strip()  # a plain scalar is dumped as a document: '1.2\n...'
    if "\n" in text:  # a string with line breaks: JSON is YAML too, and keeps it on one line
        return json.dumps(value, ensure_ascii=False, default=str)
    return text


def _dumpable(value: Any) -> Any:
    """``value`` with every text a plain ``str`` (a whole ``${NAME}`` interpolation is a ``str`` subclass, which
    ``yaml.safe_dump`` refuses) and every tuple a list."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {_dumpable(k): _dumpable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_dumpable(v) for v in value]
    return value


@record
class Registry:
    """Scorers registered in a ``scorers.yaml`` (id -> spec); empty when there is no file."""

    path: str | None = None
    scorers: dict[str, ScorerSpec] = field(default_factory=dict)
    secret_values: set[str] = field(default_factory=set)
    shared: dict[tuple[Any, ...], ScorerSpec] = field(default_factory=dict, repr=False, compare=False)
    """The one spec kept for each distinct reference parsed against this registry (see ``parse_list``)."""
    named: dict[str, ScorerSpec] = field(default_factory=dict, repr=False, compare=False)
    """That spec for a registered scorer's name, met as a reference before: parsed once, not on every turn."""
    problems: list[Problem] = field(default_factory=list)
    """Mistakes in the registry file; datasets report them beside their own."""
    broken: set[str] = field(default_factory=set)
    """Ids whose definitions are wrong: references to them report nothing more."""


class Builder:
    """Builds scorer objects from specs, once per distinct spec; the LLM client only when a judge needs it."""

    def __init__(self, imported: dict[str, Any], llm: Callable[[], LLMClient], use_cache: bool = True) -> None:
        self.imported = imported
        self.llm = llm
        """Returns the run's LLM client (made on first call)."""
        self.use_cache = use_cache
        self._built: dict[tuple[str, str, str], Scorer] = {}
        self._by_identity: dict[int, tuple[ScorerSpec, Any]] = {}
        """Specs seen before, by identity: the per-conversation lookup, without serialising arguments."""

    def build(self, spec: ScorerSpec) -> Scorer:
        known = self._by_identity.get(id(spec))
        if known is not None and known[0] is spec:
            return known[1]  # type: ignore[no-any-return]
        key = (spec.id, spec.kind, json.dumps(spec.args, sort_keys=True, default=str))
        scorer = self._built.get(key)
        if scorer is None:
            scorer = self._make(spec)
            self._built[key] = scorer
        self._by_identity[id(spec)] = (spec, scorer)  # holding the spec keeps its id from being reused
        return scorer

    def _make(self, spec: ScorerSpec) -> Scorer:
        kind = find_kind(spec.kind)
        if kind is None:  # specs come from parsing, which knows every kind
            raise ValueError(f"unknown scorer kind {spec.kind!r}")
        args = kind.args.model_validate(spec.args)
        entry = origin(kind)
        try:
            built = kind.build(args, BuildContext(spec.id, self.llm, self.use_cache, self.imported))
        except EvalcliError:
            raise
        except Exception as exc:
            if entry.builtin:
                raise
            # a package's build that raises is that package's mistake, not evalcli's (docs/extending.md)
            raise entry.error(f"could not build the scorer {spec.id} ({spec.where}): {describe(exc)}") from None
        return built if isinstance(built, Scorer) else Awaited(built, spec.kind)


class Awaited(Scorer):
    """A package's scorer that is any object with ``async def score(run)`` (docs/extending.md), not a subclass of
    ``Scorer``: awaited like every scorer that is not ``immediate``."""

    def __init__(self, scorer: Any, kind: str = "") -> None:
        self.scorer = scorer
        self.kind = kind

    async def score(self, run: ScorerRun) -> Outcome:
        outcome = await self.scorer.score(own_copy(run))  # as a custom Python scorer's (docs/extending.md)
        if not isinstance(outcome, Outcome):  # was "AttributeError: 'float' object has no attribute 'reason'"
            raise TypeError(f"the scorer kind {self.kind}'s score() returned {type(outcome).__name__}, not an "
                            "evalcli.results.Outcome (return Outcome(score=..., reason=...))")
        return self.checked(outcome)

    def checked(self, outcome: Outcome) -> Outcome:
        """The outcome with its score a finite float, as every report and the store read it: a score that is not a
        number (text, ``None`` without ``not_scorable``: a run that ended with 'internal error', or a gate missed for
        no reason given) or is not finite (``nan``, ``inf``: stored as ``null``, no error said why) is the scorer's
        error; ``True``/``False`` are 1.0/0.0 (docs/scorers.md "A score must be a finite number")."""
        if outcome.reason is not None and not isinstance(outcome.reason, str):
            raise TypeError(f"the scorer kind {self.kind}'s score() returned an Outcome whose reason is "
                            f"{type(outcome.reason).__name__}, not a string (or None)")
        if outcome.error is not None or outcome.not_scorable:
            return outcome
        score = outcome.score
        if not isinstance(score, numbers.Real):
            raise TypeError(f"the scorer kind {self.kind}'s score() returned an Outcome whose score is "
                            f"{type(score).__name__}, not a number (return Outcome(score=..., reason=...), or "
                            "Outcome(not_scorable=True, reason=...) when there is nothing to score)")
        value = finite_score(score, f"the scorer kind {self.kind}'s score()", "Outcome(not_scorable=True, reason=...)")
        return outcome if type(score) is float else dataclasses.replace(outcome, score=value)

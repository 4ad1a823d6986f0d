"""Work that depends only on the dataset is done once per run, never once per conversation: a run's work per
conversation does not grow with the number of conversations (docs/performance.md)."""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

import pytest
import yaml

from evalcli.dataset import load_dataset
from evalcli.run import RunOptions, run_evals

AGENT = '''
async def agent(input, **kw):
    return "hi " + input
'''


def calls_to_run(folder: Path, n: int, tools: bool) -> int:
    """Python function calls on the event loop's thread while ``n`` conversations run (loading not counted)."""
    header: dict[str, object] = {"target": "counted:agent", "concurrency": 4, "gates": [{"includes": "hi"}]}
    path = folder / f"d{n}{'-tools' if tools else ''}.yaml"
    data: list[dict[str, object]] = [{"id": f"c{i}", "input": f"question {i}"} for i in range(n)]
    if tools:
        # only the last item says so: a scan for it reads every item
        data[-1]["tools"] = {"get_weather": {"returns": "sunny"}}
    path.write_text(yaml.safe_dump({**header, "data": data}, sort_keys=False))
    dataset = load_dataset(path)
    profile = cProfile.Profile()
    profile.enable()
    result = run_evals(dataset, options=RunOptions(keep_items=False))
    profile.disable()
    assert result.exit_code == 0 and result.completed == n
    return sum(calls for calls, *_ in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]


@pytest.mark.parametrize("tools", [False, True], ids=["no tools", "tools controlled"])
def test_work_per_conversation_does_not_grow_with_the_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              tools: bool) -> None:
    (tmp_path / "counted.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    calls_to_run(tmp_path, 10, tools)  # once per process (modules imported on first use, evalcli/lazy.py): not counted
    calls = {n: calls_to_run(tmp_path, n, tools) for n in (50, 100, 400, 450)}
    small = (calls[100] - calls[50]) / 50  # each conversation's own calls, once-per-run work cancelled out
    large = (calls[450] - calls[400]) / 50
    # a scan of every item per conversation adds ~n calls to each: 100 here, 450 there
    assert large < small * 1.15 + 10, (small, large, calls)

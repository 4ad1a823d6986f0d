"""Storage (docs/storage.md): the SQLite file of runs, its writer thread, its migrations, and the reads behind history,
diff, compare and merge, as data (rendering is ``evalcli.reports``'s).

``Store`` opens a file (migrating it when it may write), builds the statements of a run as it happens and
reads runs back; ``StoreWriter`` is the one thread that writes during a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .history import (
    RunPoint,
    StoredRun,
    find_item,
    find_play,
    load_run,
    open_cache,
    open_existing,
    score_history,
    stored_usage,
    summary_from_json,
)
from .ids import new_run_id
from .light import stored_items
from .store import Store, StoredOptions
from .writer import StoreWriter

if TYPE_CHECKING:
    from .compare import Cell, Column, Comparison, compare_runs
    from .diff import Change, ItemChange, RunDiff, diff_runs
    from .merge import MergeResult, merge_databases
    from .paired import Detectable, Figure, PairedStats, PassFail, pair_conversations, paired_stats, pvalue_text

# what a run does not use, imported when first asked for (evalcli/lazy.py)
__getattr__ = lazy_exports(__name__, {
    ".compare": ("Cell", "Column", "Comparison", "compare_runs"),
    ".diff": ("Change", "ItemChange", "RunDiff", "diff_runs"),
    ".merge": ("MergeResult", "merge_databases"),
    ".paired": ("Detectable", "Figure", "PairedStats", "PassFail", "pair_conversations", "paired_stats", "pvalue_text"),
})

__all__ = ["Cell", "Change", "Column", "Comparison", "Detectable", "Figure", "ItemChange", "MergeResult",
           "PairedStats", "PassFail", "RunDiff", "RunPoint", "Store", "StoreWriter", "StoredOptions", "StoredRun",
           "compare_runs", "diff_runs", "find_item", "find_play", "load_run", "merge_databases", "new_run_id", "open_cache",
           "open_existing", "pair_conversations", "paired_stats", "pvalue_text", "score_history", "stored_items", "stored_usage",
           "summary_from_json"]

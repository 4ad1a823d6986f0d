"""Storage (docs/storage.md): the SQLite file of runs, its writer thread, its migrations, and the reads behind history,
diff, compare and merge, as data (rendering is ``evalcli.reports``'s).

``Store`` opens a file (migrating it when it may write), builds the statements of a run as it happens and
reads runs back; ``StoreWriter`` is the one thread that writes during a run.
"""

from __future__ import annotations

from .compare import Cell, Column, Comparison, compare_runs
from .diff import Change, ItemChange, RunDiff, diff_runs
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
from .merge import MergeResult, merge_databases
from .paired import Detectable, Figure, PairedStats, PassFail, pair_conversations, paired_stats, pvalue_text
from .store import Store, StoredOptions, stored_items
from .writer import StoreWriter

__all__ = ["Cell", "Change", "Column", "Comparison", "Detectable", "Figure", "ItemChange", "MergeResult",
           "PairedStats", "PassFail", "RunDiff", "RunPoint", "Store", "StoreWriter", "StoredOptions", "StoredRun",
           "compare_runs", "diff_runs", "find_item", "find_play", "load_run", "merge_databases", "new_run_id", "open_cache",
           "open_existing", "pair_conversations", "paired_stats", "pvalue_text", "score_history", "stored_items", "stored_usage",
           "summary_from_json"]

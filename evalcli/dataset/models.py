"""The dataset file's models (``files.py``, ``fields.py``), imported where an item or a top level first needs them
(``header.py``) and built without pydantic's plugins, as evalcli's other own models (``plugins.py``
``own_models``; docs/performance.md "Pydantic's plugins"): a user's plugin sees the user's models, not how evalcli
reads a dataset."""

from __future__ import annotations

from ..plugins import own_models

with own_models():
    from .fields import WHOLE_INTERPOLATION, with_definitions
    from .files import DatasetFile, ItemFile, LimitsFile, SimulateFile, TurnFile

__all__ = ["WHOLE_INTERPOLATION", "DatasetFile", "ItemFile", "LimitsFile", "SimulateFile", "TurnFile", "with_definitions"]

"""evalcli's version (``evalcli.__version__``), in a base module that any package may read without an import circle
(the resolved configuration a run keeps names it)."""

__version__ = "0.1.0"

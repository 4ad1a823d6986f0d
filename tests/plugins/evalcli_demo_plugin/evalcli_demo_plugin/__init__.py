"""evalcli's example plugin: the ``parrot`` adapter, for demo_parrot agents, and the ``max_words`` scorer kind
(docs/extending.md). The ``evalcli.adapters`` entry point names ``PARROT``; evalcli reads every declaration to
recognise an agent object, so this module imports no framework: the adapter's module does, when a target needs it.
"""

from __future__ import annotations

from evalcli.targets import AdapterDeclaration

PARROT = AdapterDeclaration(
    name="parrot",
    adapter="evalcli_demo_plugin.adapter:ParrotAdapter",
    summary="a demo_parrot Parrot, one history per conversation",
    recognises=("demo_parrot.Parrot",),
    install="pip install evalcli-demo-plugin",
    frameworks=("demo_parrot",),
)

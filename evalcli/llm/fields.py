"""Fields of a model's settings as YAML writes them (a judge's, a ``model`` target's): docs/models.md."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from ..errors import base_url

ApiBase = Annotated[str | None, AfterValidator(base_url)]
"""A model's ``api_base``: an http:// or https:// URL, or blank or unset (the provider's variables decide)."""

"""What every answer's shape is: a pydantic model built by ``of`` from a domain object, dumped
as the JSON every interface sends (aliases applied: ``from``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Shape(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    def dump(self) -> dict[str, Any]:
        """The JSON object, as every interface sends it."""
        return self.model_dump(mode="json", by_alias=True)

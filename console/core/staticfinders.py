"""Serves third-party browser assets that ship inside Python packages, under /static/vendor/.

plotly.js comes from the plotly wheel itself, so the pages need no CDN (air-gapped operators)
and nothing is copied into this repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

VENDOR_FILES = {
    "vendor/plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
}


class VendorFinder(BaseFinder):
    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        source = VENDOR_FILES.get(path)
        if source is None or not source.exists():
            return [] if find_all else None
        return [str(source)] if find_all else str(source)

    def list(self, ignore_patterns: Any) -> Any:
        for name, source in VENDOR_FILES.items():
            storage = FileSystemStorage(location=str(source.parent))
            storage.prefix = str(Path(name).parent)  # type: ignore[attr-defined]
            yield source.name, storage

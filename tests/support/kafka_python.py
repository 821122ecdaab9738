"""kafka-python builds its protocol classes at import time with a call Python 3.11 deprecates
(``importlib.resources.read_text``); the suite turns warnings into errors. Import every
protocol module once here, with that one warning silenced, before any test imports it."""

from __future__ import annotations

import importlib
import pkgutil
import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
    import kafka  # type: ignore[import-untyped]
    import kafka.protocol  # type: ignore[import-untyped]

    for module in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if not module.name.endswith("generate_stubs"):
            importlib.import_module(module.name)
    del kafka

"""kemu in other projects' test suites: the pytest plugin (``cluster.testing.pytest_plugin``,
registered as ``kemu`` through the ``pytest11`` entry point), built on ``cluster.api``."""

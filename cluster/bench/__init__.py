"""The benchmarks of ``scripts/bench.sh``: every row's driver and the child processes they start."""

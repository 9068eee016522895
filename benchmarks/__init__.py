"""Performance runs that print ratios measured side by side in one run (never timed tests).

    python -m benchmarks.run [--smoke] [--only ROWS] [--out results.json]   library speed and memory
    python -m benchmarks.app_latency [--smoke] [--out app_latency.json]      page reruns (AppTest)
    python -m benchmarks.load_test [--smoke] [--out load_test.json]          many browser sessions
    python -m benchmarks.poll [--smoke] [--postgres URL] [--out poll.json]   the class poll's store
    python -m benchmarks.hall_load [--smoke] [--out hall_load.json]          a lecture hall through its proxy

See docs/benchmarks.md for what each row measures and the latest figures.
"""

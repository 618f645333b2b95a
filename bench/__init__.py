"""Side-by-side benchmarks: the durable operators against the provider operators they wrap.

``python -m bench`` (``make bench``; ``make bench-quick`` for a minute-long subset) runs every section
and writes ``docs/benchmarks.md``, its charts and ``docs/benchmarks.json``. Nothing here hard-codes what
the engine does: calls are counted at the state-store boundary and in the emulators' request logs and
ledgers, so a re-run after an engine change reports the new numbers.
"""

"""One module per system; each exposes ``CASES: list[SystemCase]``."""

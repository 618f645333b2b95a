"""One module per system; each exposes ``EXAMPLES: list[ExampleDag]`` (see ``tests/examples/registry.py``)."""

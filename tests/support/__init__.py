"""Helpers the test modules share (on ``sys.path`` through ``pythonpath`` in pyproject.toml): build data, not test it.

``adapters``: a few conversations and a ghost memory for the adapter suites; ``cli``: the command in a new process;
``conversations``: conversations in the generic import format; ``copies``: what a table kept by triggers on
the messages holds against what it should; ``databases``: a database of its own on the test
server; ``transcripts``: small synthetic transcript files and the parsers run on them.
"""

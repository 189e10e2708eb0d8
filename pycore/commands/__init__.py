"""One module per ``pycore`` subcommand; :mod:`pycore.cli` imports them on demand.

The top of the tree: may import any layer; nothing imports it.
"""

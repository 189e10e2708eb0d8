"""One module per ``pycore`` subcommand; :mod:`pycore.cli` imports them on demand."""

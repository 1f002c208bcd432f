"""The ``synlm`` commands, one module each (``synlm/cli.py`` dispatches to them): each parses
its flags and calls library functions; no library module imports a command."""

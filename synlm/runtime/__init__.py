"""The plumbing every command runs on: flags and messages (``arguments``, ``usage``), run
folders and checkpoints (``runs``, ``run_summary``), threads, the checks made before a run
and the private Lightning and argparse members synlm reads (``lightning_internals``). It sits
under the library: ``synlm.lightning_cli`` (the Lightning command line) and the commands
build on it, and it imports none of them."""

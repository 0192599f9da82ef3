"""Entrypoints: the command-line interface (typer): one module per command group."""

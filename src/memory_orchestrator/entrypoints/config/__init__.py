"""Entrypoints: settings (TOML, environment), the composition root (bootstrap) and process-wide services."""

"""Memory orchestration for AI agents over graph memory backends."""

__version__ = "0.1.0"

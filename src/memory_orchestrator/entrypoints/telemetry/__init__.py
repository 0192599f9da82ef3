"""What an operator sees: metrics, statistics of a store, JSON log lines (no imports at package level)."""

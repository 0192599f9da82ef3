"""The Neo4j memory backend (official async driver; Neo4j 5.26 LTS, Community or Enterprise)."""

from memory_orchestrator.adapters.neo4j.backend import Neo4jBackend, create_backend
from memory_orchestrator.adapters.neo4j.options import Neo4jOptions
from memory_orchestrator.adapters.neo4j.retry import RetryPolicy

__all__ = ["Neo4jBackend", "Neo4jOptions", "RetryPolicy", "create_backend"]

"""Entrypoints: the MCP server: tools, their schemas and text, HTTP transport limits and auth."""

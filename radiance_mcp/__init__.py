"""radiance-mcp: the radiance resize and step-shape audit procedures as MCP tools."""

__version__ = "0.1.0"

"""What a client meets: server (MCP), cli (the terminal), published (tools/list, derived and kept),
schemas (compacted), arguments (raw arguments into input models), http_guard and http_settings
(the HTTP transport's limits and token), skills (the procedures as prompts and resources) and
demo (the resize procedure walked through the simulated fleet, over stdio)."""

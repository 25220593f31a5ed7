"""What engines say and what probes send, as text: refusals (each engine's refusal wording and edge
rules) and payloads (request bodies, null-safe answer readers). The probes read with them and the
simulator writes with them, so each phrase has one home."""

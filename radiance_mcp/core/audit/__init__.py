"""The step-shape audit, pure: step_shape (row-by-row diff of two boots), argv (the dry-run proof,
byte for byte) and serve_script/ (which mode of a serve script carries its own shaped number)."""

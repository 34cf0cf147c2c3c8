"""Tool execution behind one protocol (``base.ToolExecutor``)."""

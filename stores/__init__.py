"""Everything that persists: checkpointer factory, knowledge base, memories, feedback."""

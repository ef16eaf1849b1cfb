"""Graph nodes, one module each, plus the models and budget they share."""

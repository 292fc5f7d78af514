"""Looking inside models: attention, heads, compression, probing (issue 15)."""

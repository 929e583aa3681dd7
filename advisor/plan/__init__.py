"""SQL text to a small relational algebra and back to Spark SQL."""

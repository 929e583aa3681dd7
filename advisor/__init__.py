"""advisor: provenance-sketch data skipping for repeated analytical queries on Spark."""

__version__ = "0.1.0"

"""Command-line tools that fetch and verify the data sets (see README.md here)."""
